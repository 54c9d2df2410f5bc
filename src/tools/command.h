// The `orion` subcommands. Each cmd_<name>.cpp defines one add_<name>_command(); commands.cpp
// lists them in the order `orion --help` shows them.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "compiler/pass.h"
#include "ir/graph.h"

namespace orion::train {
struct TrainOptions;
struct LoraTrainOptions;
}  // namespace orion::train

namespace orion::tools {

void add_demo_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_mil_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_bench_train_command(CLI::App& app);  // `bench train`, under the bench command
void add_train_command(CLI::App& app);
void add_data_command(CLI::App& app);
void add_tokenizer_command(CLI::App& app);
void add_lora_command(CLI::App& app);
void add_serve_command(CLI::App& app);

// The options a training command would run with, from its flags as they would follow
// `orion train` / `orion lora train` on the command line: the same definitions, defaults, checks
// and resolution (--plain, --resume, the tokenizer beside a base model), without running anything —
// for bindings (python/) that take the options another way. Usage errors carry the CLI's message.
train::TrainOptions parse_train_flags(const std::vector<std::string>& flags);
train::LoraTrainOptions parse_lora_train_flags(const std::vector<std::string>& flags);

// `orion compile` without its printing: one of model (a file), config (a preset with random weights
// of seed) or ir_file compiled for chip into out (per program model.mil, weights/, manifest.json);
// returns the summary manifest it writes to out/manifest.json, plus "warnings" (their count).
struct CompileRequest {
  std::string model, config, ir_file, out, chip = "m4";
  int seq = 64;
  std::string use = "generate";  // the program set of generation or of training
  uint64_t seed = 1;
};
nlohmann::json compile_programs(const CompileRequest& request);
// `orion mil check`'s findings for a parsed MIL program, as written (no legalisation first).
std::vector<compiler::Diagnostic> check_as_written(ir::Graph& g, const compiler::ChipProfile& chip);

// Builds the whole CLI; main() and the CLI tests share it.
void add_all_commands(CLI::App& app);
// Runs `orion` with argv; returns the process exit code. Errors are printed as one line to stderr.
int run_main(int argc, char** argv);

}  // namespace orion::tools
