// Graph building and editing.
#include "ir/graph.h"

#include <fmt/format.h>

#include <cstring>
#include <set>

#include "base/dtype.h"
#include "base/error.h"

namespace orion::ir {

std::string Graph::fresh_name(const std::string& base) {
  std::string n = base;
  while (names_.count(n)) n = fmt::format("{}_{}", base, counter_++);
  return n;
}

namespace {
void check_name(const std::string& name) {
  bool ok = !name.empty() && (std::isalpha(uint8_t(name[0])) || name[0] == '_');
  for (char c : name) ok = ok && (std::isalnum(uint8_t(c)) || c == '_' || c == '@');
  if (!ok) throw Error(ErrorKind::Input, "is not a valid identifier ([A-Za-z_][A-Za-z0-9_@]*)", {{}, name, -1, {}});
}
}  // namespace

Value Graph::input(const std::string& name, Type type) {
  check_name(name);
  if (names_.count(name)) throw Error(ErrorKind::Input, "name is already used", {{}, name, -1, {}});
  Node n;
  n.op = Op::Input;
  n.name = name;
  n.results = {std::move(type)};
  names_[name] = int(nodes_.size());
  nodes_.push_back(std::move(n));
  return {int(nodes_.size()) - 1, 0};
}

Value Graph::constant(const std::string& name, Type type, std::shared_ptr<const ConstData> data) {
  check_name(name);
  if (names_.count(name)) throw Error(ErrorKind::Input, "name is already used", {{}, name, -1, {}});
  if (!data || data->bytes.size() != type.bytes())
    throw Error(ErrorKind::Input,
                fmt::format("constant of type {} needs {} bytes of data, has {}", type.str(), type.bytes(),
                            data ? data->bytes.size() : 0),
                {{}, name, -1, {}});
  Node n;
  n.op = Op::Const;
  n.name = name;
  n.results = {std::move(type)};
  n.data = std::move(data);
  names_[name] = int(nodes_.size());
  nodes_.push_back(std::move(n));
  return {int(nodes_.size()) - 1, 0};
}

Value Graph::constant_f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values,
                          ElemType stored_as) {
  Type t{stored_as, std::move(shape)};
  ORION_CHECK(size_t(t.numel()) == values.size(), "constant {} has {} values for {}", name, values.size(), t.str());
  auto d = std::make_shared<ConstData>();
  d->bytes.resize(t.bytes());
  switch (stored_as) {
    case ElemType::F32: std::memcpy(d->bytes.data(), values.data(), t.bytes()); break;
    case ElemType::F16: convert_dtype(values.data(), DType::F32, d->bytes.data(), DType::F16, values.size()); break;
    case ElemType::I32:
      for (size_t i = 0; i < values.size(); i++) reinterpret_cast<int32_t*>(d->bytes.data())[i] = int32_t(values[i]);
      break;
    case ElemType::Bool:
      for (size_t i = 0; i < values.size(); i++) d->bytes[i] = values[i] != 0;
      break;
  }
  return constant(name, std::move(t), std::move(d));
}

Value Graph::scalar(const std::string& name, double v, ElemType t) { return constant_f32(name, {}, {float(v)}, t); }

Value Graph::add_node(Op op, std::vector<Value> inputs, Attrs attrs, const std::string& name) {
  std::string n = name.empty() ? fresh_name(op_info(op).name) : name;
  check_name(n);
  if (names_.count(n)) throw Error(ErrorKind::Input, "name is already used", {{}, n, -1, {}});
  std::vector<Type> in;
  for (Value v : inputs) {
    if (v.node < 0 || v.node >= int(nodes_.size()) || nodes_[size_t(v.node)].dead ||
        v.result >= int(nodes_[size_t(v.node)].results.size()))
      throw Error(ErrorKind::Input, "refers to a value that does not exist", {{}, n, -1, {}});
    in.push_back(type(v));
  }
  Node node;
  node.op = op;
  node.name = n;
  node.results = infer_types(op, in, attrs, n);
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  names_[n] = int(nodes_.size());
  nodes_.push_back(std::move(node));
  return {int(nodes_.size()) - 1, 0};
}

std::vector<Value> Graph::results_of(Value v) const {
  std::vector<Value> out;
  for (int i = 0; i < int(node(v).results.size()); i++) out.push_back({v.node, i});
  return out;
}

void Graph::add_output(const std::string& name, Value v) {
  ORION_CHECK(v.node >= 0 && v.node < int(nodes_.size()), "output {} refers to no node", name);
  outputs_.push_back({name, v});
}

std::vector<int> Graph::input_nodes() const {
  std::vector<int> out;
  for (int i = 0; i < int(nodes_.size()); i++)
    if (nodes_[size_t(i)].op == Op::Input && !nodes_[size_t(i)].dead) out.push_back(i);
  return out;
}

int Graph::find(const std::string& name) const {
  auto it = names_.find(name);
  return it == names_.end() || nodes_[size_t(it->second)].dead ? -1 : it->second;
}

int Graph::replace_all_uses(Value from, Value to) {
  int n = 0;
  for (Node& node : nodes_)
    for (Value& v : node.inputs)
      if (v == from) v = to, n++;
  for (GraphOutput& o : outputs_)
    if (o.value == from) o.value = to, n++;
  return n;
}

void Graph::sort_topologically() {
  // Kahn's algorithm, always taking the earliest ready node so the order is stable.
  const int N = int(nodes_.size());
  std::vector<int> pending(size_t(N), 0);
  std::vector<std::vector<int>> users(static_cast<size_t>(N));
  for (int i = 0; i < N; i++)
    for (Value v : nodes_[size_t(i)].inputs) pending[size_t(i)]++, users[size_t(v.node)].push_back(i);
  std::set<int> ready;
  for (int i = 0; i < N; i++)
    if (!pending[size_t(i)]) ready.insert(i);
  std::vector<int> order;
  while (!ready.empty()) {
    int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int u : users[size_t(i)])
      if (--pending[size_t(u)] == 0) ready.insert(u);
  }
  ORION_CHECK(int(order.size()) == N, "graph {} has a cycle", name_);
  std::vector<int> new_index(static_cast<size_t>(N));
  std::vector<Node> sorted;
  for (int i : order) new_index[size_t(i)] = int(sorted.size()), sorted.push_back(std::move(nodes_[size_t(i)]));
  nodes_ = std::move(sorted);
  for (Node& n : nodes_)
    for (Value& v : n.inputs) v.node = new_index[size_t(v.node)];
  for (GraphOutput& o : outputs_) o.value.node = new_index[size_t(o.value.node)];
  names_.clear();
  for (int i = 0; i < N; i++) names_[nodes_[size_t(i)].name] = i;
}

void Graph::compact() {
  std::vector<int> new_index(nodes_.size(), -1);
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes_.size(); i++)
    if (!nodes_[i].dead) new_index[i] = int(kept.size()), kept.push_back(std::move(nodes_[i]));
  nodes_ = std::move(kept);
  for (Node& n : nodes_)
    for (Value& v : n.inputs) {
      ORION_CHECK(new_index[size_t(v.node)] >= 0, "node {} uses a removed node", n.name);
      v.node = new_index[size_t(v.node)];
    }
  for (GraphOutput& o : outputs_) {
    ORION_CHECK(new_index[size_t(o.value.node)] >= 0, "output {} names a removed node", o.name);
    o.value.node = new_index[size_t(o.value.node)];
  }
  names_.clear();
  for (int i = 0; i < int(nodes_.size()); i++) names_[nodes_[size_t(i)].name] = i;
}

std::string Graph::verify() const {
  std::set<std::string> seen;
  for (int i = 0; i < int(nodes_.size()); i++) {
    const Node& n = nodes_[size_t(i)];
    if (n.dead) continue;
    if (!seen.insert(n.name).second) return fmt::format("node name '{}' is used twice", n.name);
    std::vector<Type> in;
    for (Value v : n.inputs) {
      if (v.node < 0 || v.node >= i) return fmt::format("node '{}' uses a value defined after it (not topological)", n.name);
      const Node& d = nodes_[size_t(v.node)];
      if (d.dead) return fmt::format("node '{}' uses removed node '{}'", n.name, d.name);
      if (v.result >= int(d.results.size()))
        return fmt::format("node '{}' uses result {} of '{}'", n.name, v.result, d.name);
      in.push_back(d.results[size_t(v.result)]);
    }
    if (n.op == Op::Input || n.op == Op::Const) {
      if (!n.inputs.empty()) return fmt::format("'{}' is a source but has inputs", n.name);
      if (n.op == Op::Const && (!n.data || n.data->bytes.size() != n.results.at(0).bytes()))
        return fmt::format("constant '{}' has the wrong amount of data", n.name);
      continue;
    }
    try {
      if (infer_types(n.op, in, n.attrs, n.name) != n.results)
        return fmt::format("node '{}' has stale result types", n.name);
    } catch (const Error& e) {
      return e.what();
    }
  }
  std::set<std::string> out_names;
  for (const GraphOutput& o : outputs_) {
    if (!out_names.insert(o.name).second) return fmt::format("output name '{}' is used twice", o.name);
    if (o.value.node < 0 || o.value.node >= int(nodes_.size()) || nodes_[size_t(o.value.node)].dead)
      return fmt::format("output '{}' does not name a live node", o.name);
  }
  return "";
}

}  // namespace orion::ir
