// The `orion` subcommands. Each cmd_<name>.cpp defines one add_<name>_command(); commands.cpp
// lists them in the order `orion --help` shows them.
#pragma once
#include <CLI/CLI.hpp>

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

// Builds the whole CLI; main() and the CLI tests share it.
void add_all_commands(CLI::App& app);
// Runs `orion` with argv; returns the process exit code. Errors are printed as one line to stderr.
int run_main(int argc, char** argv);

}  // namespace orion::tools
