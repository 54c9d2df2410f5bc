// Training checkpoints: everything a run needs to continue bit-identically in a fresh process.
//
// File layout (little-endian), ckpt_<step, 8 digits>.ckpt:
//   offset  0  char[8]  magic "ORIONCKP"
//           8  uint32   version (kCheckpointVersion)
//          12  uint32   J: bytes of the JSON header
//          16  uint64   N: floats in each of the three arrays below
//          24  uint64   checksum of every byte from offset 32 to the end (checkpoint_hash)
//          32  char[J]  JSON: {"config": {...}, "state": {...}, "options": {...}}
//              zeros up to the next multiple of 64
//              float[N] parameters (ParamBuffer layout, padding included)
//              float[N] AdamW first moments m
//              float[N] AdamW second moments v
// The file ends exactly there; anything else is a damaged file. Checkpoints are written with
// write_file_atomic (temporary name, fsync, rename), so a process killed mid-write leaves a
// "*.tmp.<pid>" file that list_checkpoints() never takes for a checkpoint, and the previous
// checkpoints stay intact.
//
// Every problem in a file is an Input error naming the file and the field (magic, version,
// header, config.dim, n_floats, size, checksum, params) with a hint — never a crash.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/loop/adamw.h"
#include "train/model/params.h"

namespace orion::train {

constexpr char kCheckpointMagic[8] = {'O', 'R', 'I', 'O', 'N', 'C', 'K', 'P'};
constexpr uint32_t kCheckpointVersion = 1;

// Where a run stands, besides its tensors.
struct CheckpointState {
  int64_t step = 0;             // optimisation steps done: the next step's index
  int64_t adam_steps = 0;       // AdamW's t (skipped steps do not advance it)
  uint64_t data_position = 0;   // the next training batch number (TokenDataset::position)
  uint64_t rng_state = 0;       // the trainer's random stream (samples); data order is f(seed, position)
  int64_t skipped_steps = 0;    // steps skipped by the NaN/Inf guard so far
  std::string tokenizer;        // tokenizer path ("" when the run has none)
  uint64_t tokenizer_hash = 0;  // checkpoint_hash of its bytes: a changed file is refused on resume
  // A dynamic loss scale (loss_scaler.h) and its count of clean steps; 0: none (not written).
  float loss_scale = 0;
  int loss_scale_clean_steps = 0;
};

struct Checkpoint {
  ModelConfig config;
  CheckpointState state;
  nlohmann::json options;  // the training options that shape the numbers (trainer.h)
  Params params;
  std::vector<float> m, v;
  explicit Checkpoint(const ModelConfig& c) : config(c), params(c) {}
};

void write_checkpoint(const std::string& path, const CheckpointState& state, const nlohmann::json& options,
                      const Params& params, const AdamW& opt);
Checkpoint read_checkpoint(const std::string& path);
// The same from bytes in memory (a checkpoint received from rank 0); `path` names it in errors.
Checkpoint parse_checkpoint(const uint8_t* data, size_t size, const std::string& path);

// 64-bit hash of bytes (FNV-1a over 8-byte words, then the tail): detects damaged files.
uint64_t checkpoint_hash(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);
uint64_t hash_file(const std::string& path);  // Input error when unreadable

// Checkpoint files of a folder, oldest first: only names of the form ckpt_<digits>.ckpt.
std::string checkpoint_name(int64_t step);
std::vector<std::string> list_checkpoints(const std::string& dir);

// Writes dir/ckpt_<step>.ckpt and deletes all but the newest `keep` checkpoints (keep ≤ 0: all).
std::string save_checkpoint(const std::string& dir, const CheckpointState& state, const nlohmann::json& options,
                            const Params& params, const AdamW& opt, int keep);

// `path` is a checkpoint file, a folder of them, or a run folder holding checkpoints/. From a
// folder the newest checkpoint that reads cleanly is taken (a damaged newer one is reported on
// stderr and skipped). Input error when there is none; *used receives the file read.
Checkpoint load_latest_checkpoint(const std::string& path, std::string* used = nullptr);

// JSON form of a model configuration and back (Input errors name `source` and the field).
nlohmann::json config_to_json(const ModelConfig& c);
ModelConfig config_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace orion::train
