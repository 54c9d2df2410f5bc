#include "tools/command.h"

int main(int argc, char** argv) { return orion::tools::run_main(argc, argv); }
