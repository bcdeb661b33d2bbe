// Only the declaration in include/CFuzzer.h matters; SwiftPM wants one source file per C target.
#include "CFuzzer.h"
