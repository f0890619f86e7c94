#include "cli.h"

int main(int argc, char** argv) { return mo::app::run_cli(argc, argv); }
