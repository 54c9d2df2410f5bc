#include <cstdio>

#include "base/error.h"
#include "base/file.h"
#include "runtime/cpu/kernels.h"
#include "tools/command.h"

namespace orion::tools {

void add_doctor_command(CLI::App& app);  // cmd_doctor.cpp

void add_all_commands(CLI::App& app) {
  add_demo_command(app);
  add_generate_command(app);
  add_chat_command(app);
  add_serve_command(app);
  add_train_command(app);
  add_lora_command(app);
  add_tokenize_command(app);
  add_convert_command(app);
  add_export_command(app);
  add_info_command(app);
  add_compile_command(app);
  add_mil_command(app);
  add_bench_command(app);
  add_bench_train_command(app);
  add_data_command(app);
  add_tokenizer_command(app);
  add_doctor_command(app);
}

namespace {
// A command's description is one line in its parent's list of subcommands; a longer text (usage
// notes, examples) moves to the footer of the command's own --help.
void shorten_descriptions(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands({})) {
    std::string d = sub->get_description();
    if (d.find('\n') != std::string::npos) {
      // The first sentence (or the first line, if the sentence runs on) stays; the whole text moves.
      std::string flat = d;
      for (char& c : flat) c = c == '\n' ? ' ' : c;
      size_t end = flat.find(". ");
      std::string first = end != std::string::npos && end < 100 ? flat.substr(0, end + 1) : d.substr(0, d.find('\n'));
      sub->footer(d + (sub->get_footer().empty() ? "" : "\n" + sub->get_footer()));
      sub->description(first);
    }
    shorten_descriptions(*sub);
  }
}
// " bench train" for `orion bench train …`: the chain of subcommands the parser got to.
std::string command_path(const CLI::App& app) {
  std::string path;
  for (const CLI::App* a = &app; !a->get_subcommands().empty();) {
    a = a->get_subcommands()[0];
    path += " " + a->get_name();
  }
  return path;
}
}  // namespace

int run_main(int argc, char** argv) {
  CLI::App app{
      "orion — train and run small language models on the Apple Neural Engine, anesim or the CPU.\n"
      "Run `orion <command> --help` for the options of one command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "orion 0.1.0");
  add_all_commands(app);
  shorten_descriptions(app);
  install_file_fault_handlers();
  if (const std::string& why = cpu::isa_request_refused(); !why.empty())
    std::fprintf(stderr, "orion: warning: %s; using %s\n", why.c_str(), cpu::isa_name(cpu::active_isa()));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {  // an informational flag (compile --list-passes) printed what was asked
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "orion: usage error: %s (hint: run `orion%s --help`)\n", e.what(), command_path(app).c_str());
    return exit_code(ErrorKind::Usage);
  } catch (const Error& e) {
    std::fprintf(stderr, "orion: error: %s\n", e.what());
    return exit_code(e.kind());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "orion: error: out of memory (hint: use a smaller model, --dtype f16, or a shorter --seq-len)\n");
    return exit_code(ErrorKind::Runtime);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "orion: error: %s\n", e.what());
    return exit_code(ErrorKind::Runtime);
  }
  return 0;
}

}  // namespace orion::tools
