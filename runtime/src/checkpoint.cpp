// Checkpoints; see axonn/runtime/checkpoint.hpp.
#include "axonn/runtime/checkpoint.hpp"

#include <c10/util/accumulate.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "axonn/common/atomic_write.hpp"
#include "axonn/common/checksum.hpp"
#include "axonn/common/error.hpp"
#include "axonn/common/json_reader.hpp"
#include "axonn/common/remove_tree.hpp"
#include "axonn/topology/topology_io.hpp"

namespace axonn::runtime {

namespace fs = std::filesystem;
using topo::Axis;

namespace {

constexpr const char* kModule = "checkpoint";
constexpr const char* kManifest = "manifest.json";
constexpr const char* kComplete = "COMPLETE";
constexpr const char* kFormat = "axonn-checkpoint";
constexpr const char* kStepPrefix = "step-";

std::string shard_file_name(const topo::Coords& c) {
  return fmt::format("shard-x{}-y{}-z{}-p{}.pt", c[0], c[1], c[2], c[3]);
}

// The step of a directory named step-<digits>, if it is one.
std::optional<int64_t> step_of(const fs::path& dir) {
  const std::string name = dir.filename().string();
  if (name.rfind(kStepPrefix, 0) != 0 || name.size() == std::string(kStepPrefix).size()) return std::nullopt;
  const std::string digits = name.substr(std::string(kStepPrefix).size());
  if (!std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) || digits.size() > 18)
    return std::nullopt;
  return std::stoll(digits);
}

bool is_complete(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kComplete, ec) && fs::is_regular_file(dir / kManifest, ec);
}

nlohmann::json spec_to_json(const Parameter& p) {
  nlohmann::json j = {{"name", p.name},
                      {"shape", p.shape},
                      {"kind", p.spec.kind == ShardSpec::Kind::Matrix ? "matrix" : "vector"},
                      {"axis_a", topo::axis_name(p.spec.axis_a)},
                      {"qkv_heads", p.spec.qkv_heads}};
  if (p.spec.kind == ShardSpec::Kind::Matrix) j["axis_b"] = topo::axis_name(p.spec.axis_b);
  return j;
}

Parameter spec_from_json(ObjectReader r) {
  Parameter p;
  p.name = r.string("name");
  for (const auto& d : r.raw("shape")) {
    if (!d.is_number_integer() || d.get<int64_t>() <= 0)
      r.fail("shape", "is not a list of positive integers", "the full shape of the parameter");
    p.shape.push_back(d.get<int64_t>());
  }
  const std::string kind = r.one_of("kind", {"matrix", "vector"});
  p.spec.kind = kind == "matrix" ? ShardSpec::Kind::Matrix : ShardSpec::Kind::Vector;
  if (p.shape.size() != (p.spec.kind == ShardSpec::Kind::Matrix ? 2u : 1u))
    r.fail("shape", fmt::format("has {} dimensions for a {}", p.shape.size(), kind), "2 for a matrix, 1 for a vector");
  p.spec.axis_a = topo::parse_axis(r.string("axis_a"), kModule, r.where("axis_a"));
  if (p.spec.kind == ShardSpec::Kind::Matrix) p.spec.axis_b = topo::parse_axis(r.string("axis_b"), kModule, r.where("axis_b"));
  p.spec.qkv_heads = r.non_negative_int("qkv_heads");
  r.finish();
  return p;
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(kModule, "cannot read the file", path, "a readable checkpoint file");
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The file's tensors by name, after its size and hash are checked against the manifest.
c10::Dict<c10::IValue, c10::IValue> read_shard(const CheckpointManifest& m, const CheckpointFile& f) {
  const std::string path = (fs::path(m.dir) / f.file).string();
  const std::vector<char> bytes = read_bytes(path);
  const std::string hash = fnv1a64_hex(bytes.data(), bytes.size());
  if (static_cast<int64_t>(bytes.size()) != f.bytes || hash != f.fnv1a64)
    throw InputError(kModule, fmt::format("{} bytes with FNV-1a {}", bytes.size(), hash), path,
                     fmt::format("{} bytes with FNV-1a {}, as {} says (the file is damaged)", f.bytes, f.fnv1a64,
                                 (fs::path(m.dir) / kManifest).string()));
  c10::IValue v;
  try {
    v = torch::pickle_load(bytes);
  } catch (const std::exception& e) {
    throw InputError(kModule, std::string("not a LibTorch pickle: ") + e.what(), path, "a dict of tensors");
  }
  if (!v.isGenericDict()) throw InputError(kModule, "not a dict", path, "a dict of name -> tensor");
  return v.toGenericDict();
}

std::optional<at::Tensor> entry(const c10::Dict<c10::IValue, c10::IValue>& d, const std::string& key,
                                const std::string& path) {
  const auto it = d.find(key);
  if (it == d.end()) return std::nullopt;
  if (!it->value().isTensor()) throw InputError(kModule, "entry " + key + " is not a tensor", path, "a tensor");
  return it->value().toTensor();
}

// Writes the manifest, then (after `before_commit`) the completion marker.
void commit(const fs::path& dir, int64_t step, int64_t adam_steps, const CheckpointRun& run, const topo::Grid& grid,
            const topo::PlacementOrder& order, const nlohmann::json& files, const SaveOptions& options) {
  nlohmann::json manifest = {{"format", kFormat},
                                   {"version", kCheckpointVersion},
                                   {"step", step},
                                   {"adam_steps", adam_steps},
                                   {"seed", run.seed},
                                   {"grid", topo::grid_to_json(grid)},
                                   {"placement_order", topo::order_to_string(order)},
                                   {"plan", run.plan},
                                   {"files", files}};
  if (!run.data.empty()) manifest["data"] = run.data;  // absent when not recorded (nothing to check)
  write_file_atomically((dir / kManifest).string(), manifest.dump(1) + "\n", kModule);
  if (options.before_commit) options.before_commit();
  write_file_atomically((dir / kComplete).string(), std::to_string(step) + "\n", kModule);
}

// A file's tensors as pickled bytes, and its manifest entry.
std::pair<std::vector<char>, nlohmann::json> encode_shard(const topo::Coords& coords, const std::vector<Parameter>& params,
                                                           const TrainingState& state) {
  c10::Dict<std::string, at::Tensor> dict;
  nlohmann::json described = nlohmann::json::array();
  for (size_t i = 0; i < params.size(); ++i) {
    const ParameterState& ps = state.params[i];
    const std::string& n = params[i].name;
    dict.insert(n, ps.weight.contiguous());
    dict.insert(n + ".exp_avg", ps.exp_avg.contiguous());
    dict.insert(n + ".exp_avg_sq", ps.exp_avg_sq.contiguous());
    if (ps.master.defined()) dict.insert(n + ".master", ps.master.contiguous());
    described.push_back(spec_to_json(params[i]));
  }
  std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  nlohmann::json entry = {{"file", shard_file_name(coords)},
                          {"coords", coords},
                          {"bytes", bytes.size()},
                          {"fnv1a64", fnv1a64_hex(bytes.data(), bytes.size())},
                          {"parameters", described}};
  return {std::move(bytes), std::move(entry)};
}

}  // namespace

std::string checkpoint_dir(const std::string& root, int64_t step) {
  return (fs::path(root) / fmt::format("{}{:08d}", kStepPrefix, step)).string();
}

void save_checkpoint(const std::string& root, int64_t step, const CheckpointRun& run, ProcessGrid& grid,
                     const std::vector<Parameter>& params, const TrainingState& state, const SaveOptions& options) {
  AXONN_ASSERT(state.params.size() == params.size() && options.keep >= 1);
  Communicator& world = grid.world();
  const fs::path dir = checkpoint_dir(root, step);
  // Rank 0 prepares the directory (an interrupted save of this step is discarded).
  std::string error;
  if (world.rank() == 0) {
    std::error_code ec;
    remove_tree(dir.string(), ec);  // a half-removed old save must not be reused
    if (!ec) fs::create_directories(dir, ec);
    if (ec) error = ec.message();
  }
  at::Tensor failed = at::full({1}, error.empty() ? 0 : 1, at::kInt);
  all_reduce_now(world, failed, ReduceOp::Max);
  if (failed.item<int>() != 0)
    throw InputError(kModule, "cannot create the checkpoint directory" + (error.empty() ? "" : ": " + error), dir.string(),
                     "a writable directory (axrun --save)");

  // Ranks of data coordinate 0 write their shards; each describes its file in JSON.
  const topo::Coords coords = grid.layout().coords_of(world.rank());
  std::string description = "null";
  if (coords[static_cast<int>(Axis::Data)] == 0) {
    const auto [bytes, entry] = encode_shard(coords, params, state);
    write_file_atomically((dir / entry["file"].get<std::string>()).string(), std::string(bytes.begin(), bytes.end()),
                          kModule);
    description = entry.dump();
  }
  // Rank 0 collects the descriptions (lengths, then the bytes).
  const int n = world.size();
  at::Tensor length = at::full({1}, static_cast<int64_t>(description.size()), at::kLong);
  at::Tensor lengths = at::empty({n}, at::kLong);
  world.all_gather(length, lengths)->wait();
  std::vector<int64_t> counts(lengths.data_ptr<int64_t>(), lengths.data_ptr<int64_t>() + n);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  at::Tensor mine = at::empty({static_cast<int64_t>(description.size())}, at::kByte);
  std::copy(description.begin(), description.end(), mine.data_ptr<uint8_t>());
  at::Tensor all = at::empty({total}, at::kByte);
  world.all_gather_v(mine, counts, all)->wait();

  if (world.rank() == 0) {
    nlohmann::json files = nlohmann::json::array();
    const auto* text = reinterpret_cast<const char*>(all.data_ptr<uint8_t>());
    for (int64_t r = 0, at_ = 0; r < n; at_ += counts[static_cast<size_t>(r)], ++r) {
      nlohmann::json d = nlohmann::json::parse(text + at_, text + at_ + counts[static_cast<size_t>(r)]);
      if (!d.is_null()) files.push_back(std::move(d));
    }
    commit(dir, step, state.adam_steps, run, grid.grid(), grid.layout().order(), files, options);
    // The newest `keep` complete checkpoints stay; incomplete ones of earlier steps go.
    std::vector<std::pair<int64_t, fs::path>> complete;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root, ec)) {
      const auto s = step_of(e.path());
      if (!s || !e.is_directory()) continue;
      if (is_complete(e.path())) complete.emplace_back(*s, e.path());
      else if (*s < step) remove_tree(e.path().string(), ec);
    }
    std::sort(complete.begin(), complete.end());
    for (size_t i = 0; i + static_cast<size_t>(options.keep) < complete.size(); ++i) {
      fs::remove(complete[i].second / kComplete, ec);  // no longer loadable before it is half removed
      remove_tree(complete[i].second.string(), ec);
    }
  }
  world.barrier();  // every rank returns once the checkpoint is complete
}

std::string find_checkpoint(const std::string& path) {
  if (is_complete(path)) return path;
  std::error_code ec;
  std::optional<std::pair<int64_t, fs::path>> best;
  if (fs::is_directory(path, ec))
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const auto s = step_of(e.path());
      if (s && is_complete(e.path()) && (!best || *s > best->first)) best.emplace(*s, e.path());
    }
  if (!best)
    throw InputError(kModule, "no complete checkpoint", path,
                     fmt::format("a checkpoint directory with {} and {}, or a directory of {}NNNNNNNN checkpoints "
                                 "(axrun --save)",
                                 kManifest, kComplete, kStepPrefix));
  return best->second.string();
}

CheckpointManifest read_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kManifest).string();
  const nlohmann::json j = read_json_file(kModule, path);
  ObjectReader r(j, path, kModule);
  if (r.string("format") != kFormat) r.fail("format", "is not an axonn checkpoint", std::string("\"") + kFormat + "\"");
  if (r.integer("version") != kCheckpointVersion)
    r.fail("version", "is a version this axrun cannot read", std::to_string(kCheckpointVersion));
  CheckpointManifest m;
  m.dir = dir;
  m.step = r.non_negative_int("step");
  m.adam_steps = r.non_negative_int("adam_steps");
  m.seed = static_cast<uint64_t>(r.non_negative_int("seed"));
  if (r.has("data")) m.data = r.string("data");
  m.grid = topo::grid_from_json(r.object("grid"));
  m.order = topo::parse_order(r.string("placement_order"), kModule, r.where("placement_order"));
  m.plan = r.raw("plan");
  const topo::RankLayout layout(m.grid, m.order);
  for (ObjectReader f : r.object_array("files")) {
    CheckpointFile cf;
    cf.file = f.string("file");
    if (cf.file.empty() || cf.file.find('/') != std::string::npos || cf.file.find("..") != std::string::npos)
      f.fail("file", "is not a plain file name", "a file of the checkpoint directory");
    const auto& coords = f.raw("coords");
    if (!coords.is_array() || coords.size() != static_cast<size_t>(topo::kNumAxes))
      f.fail("coords", "is not a list of 5 coordinates", "[x, y, z, pipe, data]");
    for (int a = 0; a < topo::kNumAxes; ++a) {
      const auto& c = coords[static_cast<size_t>(a)];
      if (!c.is_number_integer() || c.get<int64_t>() < 0 || c.get<int64_t>() >= m.grid.size(static_cast<Axis>(a)))
        f.fail("coords", "holds a coordinate outside the grid", "coordinates within " + m.grid.to_string());
      cf.coords[static_cast<size_t>(a)] = c.get<int64_t>();
    }
    cf.bytes = f.non_negative_int("bytes");
    cf.fnv1a64 = f.string("fnv1a64");
    for (ObjectReader p : f.object_array("parameters")) cf.parameters.push_back(spec_from_json(p));
    f.finish();
    m.files.push_back(std::move(cf));
  }
  r.finish();
  return m;
}

TrainingState load_checkpoint(const CheckpointManifest& m, const topo::Grid& grid, const topo::Coords& coords,
                              const std::vector<Parameter>& params) {
  TrainingState out;
  out.adam_steps = m.adam_steps;
  out.params.resize(params.size());
  // Which files hold each parameter, and the checkpoint's description of it.
  std::vector<std::vector<size_t>> holders(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    for (size_t f = 0; f < m.files.size(); ++f)
      for (const Parameter& q : m.files[f].parameters) {
        if (q.name != params[i].name) continue;
        if (q.shape != params[i].shape)
          throw InputError(kModule,
                           fmt::format("parameter {} has shape [{}] in the checkpoint", q.name, fmt::join(q.shape, ", ")),
                           (fs::path(m.dir) / kManifest).string(),
                           fmt::format("[{}], as in the model being trained (a checkpoint of the same model)",
                                       fmt::join(params[i].shape, ", ")));
        holders[i].push_back(f);
      }
    if (holders[i].empty())
      throw InputError(kModule, "parameter " + params[i].name + " is in no file of the checkpoint",
                       (fs::path(m.dir) / kManifest).string(), "a checkpoint of the same model");
  }
  // On the same grid, this rank's file holds exactly its shards.
  std::vector<size_t> needed;
  for (size_t f = 0; f < m.files.size(); ++f) {
    bool holds = false;
    for (const auto& h : holders) holds = holds || std::find(h.begin(), h.end(), f) != h.end();
    topo::Coords same = coords;
    same[static_cast<int>(Axis::Data)] = 0;
    if (holds && (!(m.grid == grid) || m.files[f].coords == same)) needed.push_back(f);
  }
  // The positions this rank's shards hold (their shapes too).
  std::vector<at::Tensor> mine(params.size()), filled(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    mine[i] = shard_positions(params[i].spec, params[i].shape, grid, coords);
    filled[i] = at::zeros({mine[i].numel()}, at::kBool);
  }
  for (size_t f : needed) {
    const CheckpointFile& file = m.files[f];
    const std::string path = (fs::path(m.dir) / file.file).string();
    const auto dict = read_shard(m, file);
    for (size_t i = 0; i < params.size(); ++i) {
      const auto q = std::find_if(file.parameters.begin(), file.parameters.end(),
                                  [&](const Parameter& p) { return p.name == params[i].name; });
      if (q == file.parameters.end()) continue;
      // Where each of the file's elements goes in this rank's shard (-1: not here).
      at::Tensor slot = at::full({c10::multiply_integers(params[i].shape)}, -1, at::kLong);
      slot.index_put_({mine[i].reshape({-1})}, at::arange(mine[i].numel(), at::kLong));
      const at::Tensor target = slot.index_select(0, shard_positions(q->spec, q->shape, m.grid, file.coords).reshape({-1}));
      const at::Tensor keep = target.ge(0);
      const at::Tensor to = target.masked_select(keep);
      ParameterState& ps = out.params[i];
      auto scatter = [&](at::Tensor& dest, const std::string& key, bool required) {
        const auto src = entry(dict, key, path);
        if (!src) {
          if (required || dest.defined())
            throw InputError(kModule, "no tensor " + key, path, "the shards of the manifest's parameters");
          return;
        }
        if (!dest.defined() && filled[i].any().item<bool>())  // an earlier file had none
          throw InputError(kModule, "tensor " + key + " is in some files only", path, "it in every file or in none");
        if (src->numel() != target.numel())
          throw InputError(kModule, fmt::format("{} has {} elements", key, src->numel()), path,
                           fmt::format("{}, the shard of the manifest's layout", target.numel()));
        if (!dest.defined()) dest = at::empty({mine[i].numel()}, src->options());
        dest.index_put_({to}, src->reshape({-1}).masked_select(keep).to(dest.scalar_type()));
      };
      scatter(ps.weight, params[i].name, true);
      scatter(ps.exp_avg, params[i].name + ".exp_avg", true);
      scatter(ps.exp_avg_sq, params[i].name + ".exp_avg_sq", true);
      scatter(ps.master, params[i].name + ".master", false);
      filled[i].index_fill_(0, to, true);
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (!filled[i].all().item<bool>())
      throw InputError(kModule, "parameter " + params[i].name + " is not wholly covered by the files of the checkpoint",
                       (fs::path(m.dir) / kManifest).string(),
                       "every shard of every parameter (a checkpoint written by every rank of data coordinate 0)");
    ParameterState& ps = out.params[i];
    for (at::Tensor* t : {&ps.weight, &ps.exp_avg, &ps.exp_avg_sq, &ps.master})
      if (t->defined()) *t = t->view(mine[i].sizes());
  }
  return out;
}

namespace {

constexpr const char* kStepKey = "axonn.step";
constexpr const char* kAdamStepsKey = "axonn.adam_steps";
constexpr const char* kSeedKey = "axonn.seed";
constexpr const char* kDataKey = "axonn.data";  // the data's identity as UTF-8 bytes (uint8), when recorded

// Every parameter of the checkpoint, once, in the order of its files.
std::vector<Parameter> all_parameters(const CheckpointManifest& m) {
  std::vector<Parameter> out;
  for (const CheckpointFile& f : m.files)
    for (const Parameter& p : f.parameters)
      if (std::none_of(out.begin(), out.end(), [&](const Parameter& q) { return q.name == p.name; })) out.push_back(p);
  return out;
}

}  // namespace

void write_serial_state(const CheckpointManifest& m, const std::string& path) {
  const std::vector<Parameter> params = all_parameters(m);
  const TrainingState s = load_checkpoint(m, topo::Grid{}, topo::Coords{}, params);
  c10::Dict<std::string, at::Tensor> dict;
  for (size_t i = 0; i < params.size(); ++i) {
    // On one rank a matrix's shard is its whole block, flattened (sharding.hpp).
    auto whole = [&](const at::Tensor& t) { return t.reshape(params[i].shape); };
    const std::string& n = params[i].name;
    dict.insert(n, whole(s.params[i].weight));
    dict.insert(n + ".exp_avg", whole(s.params[i].exp_avg));
    dict.insert(n + ".exp_avg_sq", whole(s.params[i].exp_avg_sq));
    if (s.params[i].master.defined()) dict.insert(n + ".master", whole(s.params[i].master));
  }
  dict.insert(kStepKey, at::scalar_tensor(m.step, at::kLong));
  dict.insert(kAdamStepsKey, at::scalar_tensor(m.adam_steps, at::kLong));
  dict.insert(kSeedKey, at::scalar_tensor(static_cast<int64_t>(m.seed), at::kLong));
  if (!m.data.empty())
    dict.insert(kDataKey, at::tensor(at::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(m.data.data()), m.data.size()),
                                     at::kByte));
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  write_file_atomically(path, std::string(bytes.begin(), bytes.end()), kModule);
}

std::string checkpoint_from_serial(const std::string& serial_path, const std::string& root) {
  c10::IValue v;
  try {
    v = torch::pickle_load(read_bytes(serial_path));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw InputError(kModule, std::string("not a LibTorch pickle: ") + e.what(), serial_path, "a serial state dict");
  }
  if (!v.isGenericDict()) throw InputError(kModule, "not a dict", serial_path, "a dict of name -> tensor");
  const auto dict = v.toGenericDict();
  auto scalar = [&](const char* key) {
    const auto t = entry(dict, key, serial_path);
    if (!t || t->numel() != 1 || t->scalar_type() != at::kLong)
      throw InputError(kModule, std::string("no integer ") + key, serial_path,
                       "a serial state dict as axckpt to-serial writes it");
    return t->item<int64_t>();
  };
  const int64_t step = scalar(kStepKey);
  TrainingState state;
  state.adam_steps = scalar(kAdamStepsKey);
  CheckpointRun run;
  run.seed = static_cast<uint64_t>(scalar(kSeedKey));
  if (const auto data = entry(dict, kDataKey, serial_path)) {
    if (data->dim() != 1 || data->scalar_type() != at::kByte || data->numel() == 0)
      throw InputError(kModule, std::string("entry ") + kDataKey + " is not a 1-D uint8 tensor", serial_path,
                       "the data's identity as bytes, as axckpt to-serial writes it");
    const at::Tensor bytes = data->contiguous();
    run.data.assign(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), static_cast<size_t>(bytes.numel()));
  }
  std::vector<Parameter> params;
  for (const auto& kv : dict) {
    if (!kv.key().isString()) throw InputError(kModule, "a key that is not a string", serial_path, "parameter names");
    const std::string name = kv.key().toStringRef();
    if (name.rfind("axonn.", 0) == 0) continue;
    bool suffix = false;
    for (const char* s : {".exp_avg", ".exp_avg_sq", ".master"})
      suffix = suffix || (name.size() > std::strlen(s) && name.compare(name.size() - std::strlen(s), std::string::npos, s) == 0);
    if (suffix) continue;
    const at::Tensor w = *entry(dict, name, serial_path);
    if (w.dim() < 1 || w.dim() > 2)
      throw InputError(kModule, fmt::format("{} has {} dimensions", name, w.dim()), serial_path, "a matrix or a vector");
    // On one rank every layout is the whole tensor: the spec only names the kind.
    Parameter p;
    p.name = name;
    p.shape = w.sizes().vec();
    p.spec = w.dim() == 2 ? ShardSpec::matrix(model::LinearRole::Column) : ShardSpec::vector(Axis::X);
    ParameterState ps;
    ps.weight = w;
    auto required = [&](const std::string& key) {
      const auto t = entry(dict, key, serial_path);
      if (!t || t->sizes() != w.sizes())
        throw InputError(kModule, "no tensor " + key + " of the shape of " + name, serial_path,
                         "Adam's state beside each parameter");
      return *t;
    };
    ps.exp_avg = required(name + ".exp_avg");
    ps.exp_avg_sq = required(name + ".exp_avg_sq");
    if (const auto master = entry(dict, name + ".master", serial_path)) ps.master = *master;
    params.push_back(std::move(p));
    state.params.push_back(std::move(ps));
  }
  const fs::path dir = checkpoint_dir(root, step);
  std::error_code ec;
  remove_tree(dir.string(), ec);  // a half-removed old one must not be reused
  if (!ec) fs::create_directories(dir, ec);
  if (ec) throw InputError(kModule, "cannot create the checkpoint directory: " + ec.message(), dir.string(), "a writable directory");
  const auto [bytes, file] = encode_shard(topo::Coords{}, params, state);
  write_file_atomically((dir / file["file"].get<std::string>()).string(), std::string(bytes.begin(), bytes.end()),
                        kModule);
  commit(dir, step, state.adam_steps, run, topo::Grid{}, topo::default_order(), nlohmann::json::array({file}), {});
  return dir.string();
}

}  // namespace axonn::runtime
