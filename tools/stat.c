#include "hpr.h"
int cmd_stat(int argc, char **argv) { return 0; }
