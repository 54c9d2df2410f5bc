// MIL emitter (see emit_mil.h for the shape of the text).
#include "compiler/mil/emit_mil.h"

#include <set>

#include <fmt/format.h>

#include "base/error.h"
#include "compiler/blob/blob_file.h"
#include "compiler/mil/mil_syntax.h"

namespace orion::compiler {
namespace {

using ir::Node;
using ir::Op;
using ir::Value;
using mil::ArgKind;
using mil::ArgSpec;

// Facts about the tool chain the text claims to come from; the framework reads this line.
constexpr const char* kBuildInfo =
    "[buildInfo = dict<string, string>({{\"coremlc-component-MIL\", \"3510.2.1\"}, {\"coremlc-version\", "
    "\"3505.4.1\"}, {\"coremltools-component-milinternal\", \"\"}, {\"coremltools-version\", \"9.0\"}})]";
constexpr const char* kIndent = "        ";

[[noreturn]] void fail(const std::string& node, const std::string& msg, const std::string& hint = {}) {
  throw Error(ErrorKind::Input, msg, {{}, node, -1, hint});
}

class Emitter {
 public:
  Emitter(const ir::Graph& g, const ChipProfile& chip, const EmitOptions& opt) : g_(g), chip_(chip), opt_(opt) {}

  CompiledProgram run() {
    if (std::string problem = g_.verify(); !problem.empty())
      throw Error(ErrorKind::Input, "graph does not verify: " + problem, {{}, g_.name(), -1, {}});
    p_.name = g_.name();
    p_.chip = chip_.name;
    name_values();
    write_blobs();
    out_ += fmt::format("program({})\n{}\n{{\n", chip_.program_version, kBuildInfo);
    signature();
    for (int i = 0; i < int(g_.nodes().size()); i++) statement(i);
    outputs();
    bindings();
    p_.mil_text = std::move(out_);
    return std::move(p_);
  }

 private:
  // Every MIL identifier is fixed before any text is written, so op-parameter consts can be named
  // without colliding with a node that comes later.
  void name_values() {
    for (int i = 0; i < int(g_.nodes().size()); i++) {
      const Node& n = g_.node(i);
      if (n.dead) continue;
      if (n.results.size() > 1) claim(n.name, n.name);  // a split's own name, besides its results'
      for (int r = 0; r < int(n.results.size()); r++) {
        std::string var = n.results.size() == 1 ? n.name : fmt::format("{}_{}", n.name, r);
        claim(var, n.name);
        vars_[Value{i, r}] = var;
      }
    }
    for (const ir::GraphOutput& o : g_.outputs())
      if (o.name != vars_.at(o.value)) claim(o.name, o.name);
  }

  void claim(const std::string& id, const std::string& node) {
    if (!used_.insert(id).second)
      fail(node, fmt::format("MIL name '{}' would be defined twice", id), "rename the node or the graph output");
  }

  std::string fresh(const std::string& base) {
    std::string id = base;
    for (int k = 1; used_.count(id); k++) id = fmt::format("{}_{}", base, k);
    used_.insert(id);
    return id;
  }

  // Builds the weight files up front, so every BLOBFILE constant knows its file and record offset.
  void write_blobs() {
    std::vector<const Node*> consts;
    for (const Node& n : g_.nodes())
      if (n.op == Op::Const && mil::stored_as_blob(n.results[0])) consts.push_back(&n);
    auto blob_of = [](const Node& n) {
      return blob::BlobIn{*blob::blob_dtype_of(n.results[0].elem), n.data->bytes.data(), n.data->bytes.size()};
    };
    size_t align = size_t(chip_.buffer_alignment);
    if (opt_.weight_files == EmitOptions::WeightFiles::PerConstant) {
      for (const Node* n : consts) {
        std::vector<uint64_t> offs;
        std::string key = weight_key(n->name + ".bin");
        p_.weights[key] = blob::write_blob_file({blob_of(*n)}, align, &offs);
        blob_ref_[n->name] = {key, offs[0]};
      }
    } else if (!consts.empty()) {
      std::vector<blob::BlobIn> in;
      for (const Node* n : consts) in.push_back(blob_of(*n));
      std::vector<uint64_t> offs;
      std::string key = weight_key("weight.bin");
      p_.weights[key] = blob::write_blob_file(in, align, &offs);
      for (size_t i = 0; i < consts.size(); i++) blob_ref_[consts[i]->name] = {key, offs[i]};
    }
    p_.blob_constants = int(consts.size());
  }

  //     func main<ios18>(tensor<fp16, [1, 768, 1, 64]> x, tensor<fp16, [1, 768, 1, 64]> y) {
  void signature() {
    std::vector<std::string> params;
    for (int i : g_.input_nodes())
      params.push_back(fmt::format("{} {}", mil::type_str(g_.node(i).results[0], verbose()), g_.node(i).name));
    out_ += fmt::format("    func main<{}>({}) {{\n", chip_.function_target, fmt::join(params, ", "));
  }

  bool verbose() const { return chip_.verbose_literals; }

  void statement(int index) {
    const Node& n = g_.node(index);
    if (n.dead || n.op == Op::Input) return;
    if (n.op == Op::Const) return constant(n);
    const char* mil = ir::op_info(n.op).mil;
    if (!*mil || mil::mil_args(n.op).empty())
      fail(n.name, fmt::format("{} has no MIL form; run legalize-ane before emitting", ir::op_info(n.op).name),
           "legalize-ane rewrites neg, gelu and silu (C2) and attention (C15) into MIL ops");
    if (n.op == Op::Cast && !chip_.supports_cast)
      fail(n.name, fmt::format("chip {} has no cast op (rule C18)", chip_.name),
           "keep the program in one element type on M1/M2, or choose --chip m3 or later");
    std::vector<std::string> args;
    for (const ArgSpec& a : mil::mil_args(n.op)) {
      if (a.kind == ArgKind::OptOperand && a.index >= int(n.inputs.size())) continue;
      args.push_back(fmt::format("{} = {}", a.mil, argument(n, a)));
    }
    std::vector<std::string> results;
    for (int r = 0; r < int(n.results.size()); r++)
      results.push_back(fmt::format("{} {}", mil::type_str(n.results[size_t(r)], verbose()), vars_.at(Value{index, r})));
    out_ += fmt::format("{}{} = {}({})[name = string(\"{}\")];\n", kIndent, fmt::join(results, ", "), mil,
                        fmt::join(args, ", "), n.name);
  }

  // The text after "name = " for one argument; parameters are written as consts first.
  std::string argument(const Node& n, const ArgSpec& a) {
    switch (a.kind) {
      case ArgKind::Operand:
      case ArgKind::OptOperand: return vars_.at(n.inputs[size_t(a.index)]);
      case ArgKind::OperandTuple: {
        std::vector<std::string> v;
        for (Value in : n.inputs) v.push_back(vars_.at(in));
        return fmt::format("({})", fmt::join(v, ", "));
      }
      case ArgKind::AttrInt: return int_param(n, a, ir::attr_int(n.attrs, a.attr, n.name, dflt_int(a)));
      case ArgKind::FixedInt: return int_param(n, a, a.fixed[0]);
      case ArgKind::AttrInts: return ints_param(n, a, ir::attr_ints(n.attrs, a.attr, n.name));
      case ArgKind::FixedInts: return ints_param(n, a, a.fixed);
      case ArgKind::AttrBool:
        return bool_param(n, a,
                          ir::attr_bool(n.attrs, a.attr, n.name,
                                        a.has_default ? std::optional<bool>(a.dflt != 0) : std::nullopt));
      case ArgKind::FixedBool: return bool_param(n, a, a.fixed[0] != 0);
      case ArgKind::AttrDType: return string_param(n, a, ir::elem_name(n.results[0].elem));
      case ArgKind::FixedString: return string_param(n, a, a.text);
      case ArgKind::AttrElemLikeX: {
        double v = ir::attr_float(n.attrs, a.attr, n.name, double(a.dflt));
        ir::Type t{g_.type(n.inputs[0]).elem, {}};
        std::vector<uint8_t> bytes = mil::element_bytes(t.elem, v);
        return param(n, a, t, mil::value_literal(t, bytes.data(), verbose()));
      }
    }
    return "";
  }

  static std::optional<int64_t> dflt_int(const ArgSpec& a) { return a.has_default ? std::optional(a.dflt) : std::nullopt; }

  //         int32 y_groups = const()[name = string("y_groups"), val = int32(1)];
  std::string int_param(const Node& n, const ArgSpec& a, int64_t v) {
    if (v < INT32_MIN || v > INT32_MAX) fail(n.name, fmt::format("{} = {} does not fit int32", a.mil, v));
    return param(n, a, {ir::ElemType::I32, {}}, fmt::format("{}({})", mil::type_str({ir::ElemType::I32, {}}, verbose()), v));
  }
  //         tensor<int32, [4]> y_perm = const()[name = string("y_perm"), val = tensor<int32, [4]>([0, 1, 3, 2])];
  std::string ints_param(const Node& n, const ArgSpec& a, const std::vector<int64_t>& v) {
    ir::Type t{ir::ElemType::I32, {int64_t(v.size())}};
    for (int64_t x : v)
      if (x < INT32_MIN || x > INT32_MAX) fail(n.name, fmt::format("{} value {} does not fit int32", a.mil, x));
    return param(n, a, t, fmt::format("{}([{}])", mil::type_str(t, verbose()), fmt::join(v, ", ")));
  }
  //         bool mm_transpose_x = const()[name = string("mm_transpose_x"), val = bool(false)];   (C3)
  std::string bool_param(const Node& n, const ArgSpec& a, bool v) {
    ir::Type t{ir::ElemType::Bool, {}};
    return param(n, a, t, fmt::format("{}({})", mil::type_str(t, verbose()), v ? "true" : "false"));
  }
  //         string y_pad_type = const()[name = string("y_pad_type"), val = string("valid")];
  std::string string_param(const Node& n, const ArgSpec& a, const std::string& s) {
    std::string id = fresh(fmt::format("{}_{}", n.name, a.mil));
    out_ += fmt::format("{}string {} = const()[name = string(\"{}\"), val = string(\"{}\")];\n", kIndent, id, id, s);
    p_.parameter_constants++;
    return id;
  }
  std::string param(const Node& n, const ArgSpec& a, const ir::Type& t, const std::string& literal) {
    std::string id = fresh(fmt::format("{}_{}", n.name, a.mil));
    out_ += fmt::format("{}{} {} = const()[name = string(\"{}\"), val = {}];\n", kIndent, mil::type_str(t, verbose()), id,
                        id, literal);
    p_.parameter_constants++;
    return id;
  }

  //         fp16 eps = const()[name = string("eps"), val = fp16(0.00001)];
  //         tensor<fp16, [768, 768, 1, 1]> wq = const()[name = string("wq"), val = tensor<fp16, [768, 768, 1, 1]>(BLOBFILE(path = string("@model_path/weights/wq.bin"), offset = uint64(64)))];
  void constant(const Node& n) {
    const ir::Type& t = n.results[0];
    std::string val;
    if (auto it = blob_ref_.find(n.name); it != blob_ref_.end()) {
      val = fmt::format("{}(BLOBFILE(path = string(\"{}\"), offset = uint64({})))", mil::type_str(t, verbose()),
                        it->second.first, it->second.second);
    } else {
      val = mil::value_literal(t, n.data->bytes.data(), verbose());
      p_.inline_constants++;
    }
    out_ += fmt::format("{}{} {} = const()[name = string(\"{}\"), val = {}];\n", kIndent, mil::type_str(t, verbose()),
                        n.name, n.name, val);
  }

  //         tensor<fp16, [1, 64, 1, 16]> out = identity(x = y_1)[name = string("out")];
  //     } -> (out, z);
  //   }
  void outputs() {
    std::vector<std::string> names;
    for (const ir::GraphOutput& o : g_.outputs()) {
      std::string v = vars_.at(o.value);
      if (o.name != v)
        out_ += fmt::format("{}{} {} = identity(x = {})[name = string(\"{}\")];\n", kIndent,
                            mil::type_str(g_.type(o.value), verbose()), o.name, v, o.name);
      names.push_back(o.name);
    }
    out_ += fmt::format("    }} -> ({});\n}}\n", fmt::join(names, ", "));
  }

  void bindings() {
    std::vector<std::pair<std::string, ir::Type>> in, out;
    for (int i : g_.input_nodes()) in.push_back({g_.node(i).name, g_.node(i).results[0]});
    for (const ir::GraphOutput& o : g_.outputs()) out.push_back({o.name, g_.type(o.value)});
    p_.inputs = make_binding_table(in, chip_);
    p_.outputs = make_binding_table(out, chip_);
  }

  const ir::Graph& g_;
  const ChipProfile& chip_;
  const EmitOptions& opt_;
  CompiledProgram p_;
  std::string out_;
  std::set<std::string> used_;
  std::map<Value, std::string> vars_;
  std::map<std::string, std::pair<std::string, uint64_t>> blob_ref_;  // const name → (key, record offset)
};

}  // namespace

CompiledProgram emit_mil(const ir::Graph& g, const ChipProfile& chip, const EmitOptions& options) {
  return Emitter(g, chip, options).run();
}

}  // namespace orion::compiler
