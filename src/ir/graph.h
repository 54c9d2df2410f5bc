// The graph IR: a program of one ANE kernel as a list of nodes in topological order.
//
// A Node applies one Op (ops.def) to Values (results of earlier nodes) and produces one result —
// or several for `split`. Every result has an element type and a shape; ANE tensors are 4-D
// [1, C, 1, S] (batch, channels, 1, sequence), attention uses [1, H, D, S] or [1, H, S, D].
// Graph's builder methods infer the result types and throw an orion::Error naming the node when
// the inputs do not fit; verify() rechecks a whole graph after passes have edited it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace orion::ir {

enum class Op : uint8_t {
#define OP(e, name, mil, mn, mx, flags) e,
#include "ir/ops.def"
#undef OP
};
enum OpFlag : uint32_t {
  kSource = 1,
  kUnary = 2,
  kBinary = 4,
  kReduce = 8,
  kLayout = 16,
  kComposite = 32,
  kRejectedByAne = 64
};
struct OpInfo {
  const char* name;  // IR text name
  const char* mil;   // MIL op name; "" when the op must be legalised first
  int min_inputs, max_inputs;
  uint32_t flags;
};
const OpInfo& op_info(Op op);
std::optional<Op> op_from_name(const std::string& name);
constexpr int kNumOps = 0
#define OP(e, name, mil, mn, mx, flags) +1
#include "ir/ops.def"
#undef OP
    ;

enum class ElemType : uint8_t { F16, F32, I32, Bool };
const char* elem_name(ElemType t);  // "fp16", "fp32", "int32", "bool" (MIL spelling)
std::optional<ElemType> elem_from_name(const std::string& s);
size_t elem_size(ElemType t);  // bytes (bool: 1)

struct Type {
  ElemType elem = ElemType::F16;
  std::vector<int64_t> shape;
  int64_t numel() const;
  size_t bytes() const { return size_t(numel()) * elem_size(elem); }
  bool operator==(const Type&) const = default;
  std::string str() const;  // "fp16[1, 768, 1, 64]"
};

using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>>;
using Attrs = std::map<std::string, AttrValue>;

struct Value {
  int node = -1;
  int result = 0;
  bool valid() const { return node >= 0; }
  bool operator==(const Value&) const = default;
  auto operator<=>(const Value&) const = default;
};

// Constant data, in the node's element type, row-major.
struct ConstData {
  std::vector<uint8_t> bytes;
};

struct Node {
  Op op = Op::Identity;
  std::string name;  // unique; the MIL identifier
  std::vector<Value> inputs;
  Attrs attrs;
  std::vector<Type> results;              // one per result
  std::shared_ptr<const ConstData> data;  // Const only
  bool dead = false;                      // removed by a pass; dropped by Graph::compact()
};

struct GraphOutput {
  std::string name;
  Value value;
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  // --- building (each infers the result type; Error naming the node on a mismatch) ---
  Value input(const std::string& name, Type type);
  Value constant(const std::string& name, Type type, std::shared_ptr<const ConstData> data);
  Value constant_f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values,
                     ElemType stored_as = ElemType::F16);
  Value scalar(const std::string& name, double v, ElemType t = ElemType::F16);
  // Any op; name "" picks a fresh one ("<op>_<n>"). For split, results come from results_of().
  Value add_node(Op op, std::vector<Value> inputs, Attrs attrs = {}, const std::string& name = "");
  std::vector<Value> results_of(Value v) const;  // every result of v's node
  void add_output(const std::string& name, Value v);

  // --- reading ---
  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(Value v) const { return nodes_.at(size_t(v.node)); }
  const Node& node(int i) const { return nodes_.at(size_t(i)); }
  Node& node_mut(int i) { return nodes_.at(size_t(i)); }
  const Type& type(Value v) const { return node(v).results.at(size_t(v.result)); }
  const std::vector<GraphOutput>& outputs() const { return outputs_; }
  std::vector<GraphOutput>& outputs_mut() { return outputs_; }
  std::vector<int> input_nodes() const;     // in declaration order
  int find(const std::string& name) const;  // node index or −1

  // --- editing (for passes) ---
  // Redirects every use of `from` (node inputs and graph outputs) to `to`; returns how many.
  int replace_all_uses(Value from, Value to);
  // Passes append replacement nodes with add_node and then restore topological order with this
  // (stable: nodes keep their relative order where dependencies allow).
  void sort_topologically();
  // Drops dead nodes and renumbers the Values that refer to the rest.
  void compact();
  std::string fresh_name(const std::string& base);

  // Checks the whole graph: topological order, arity, inferred types equal the stored ones, unique
  // names, outputs naming live nodes. Returns "" when valid, else the first problem.
  std::string verify() const;

 private:
  std::string name_;
  std::vector<Node> nodes_;
  std::vector<GraphOutput> outputs_;
  std::map<std::string, int> names_;
  int counter_ = 0;
};

// Result types of op applied to inputs of the given types (the shape-inference rules of every op);
// throws an orion::Error whose field is `node_name` when they do not fit.
std::vector<Type> infer_types(Op op, const std::vector<Type>& inputs, const Attrs& attrs, const std::string& node_name);

// Attribute helpers that throw a clear Error naming the node and the attribute.
int64_t attr_int(const Attrs& a, const std::string& key, const std::string& node, std::optional<int64_t> dflt = {});
bool attr_bool(const Attrs& a, const std::string& key, const std::string& node, std::optional<bool> dflt = {});
double attr_float(const Attrs& a, const std::string& key, const std::string& node, std::optional<double> dflt = {});
std::vector<int64_t> attr_ints(const Attrs& a, const std::string& key, const std::string& node,
                               std::optional<std::vector<int64_t>> dflt = {});

}  // namespace orion::ir
