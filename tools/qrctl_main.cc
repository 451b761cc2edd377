// qrctl: see tools/qrctl_lib.h.
#include <iostream>

#include "tools/qrctl_lib.h"

int main(int argc, char** argv) { return qr::tools::RunQrctl(argc, argv, std::cout, std::cerr); }
