// libFuzzer's entry point for programs with their own main (LLVM's libFuzzer documentation, "Using
// libFuzzer as a library"); the Swift toolchain's libclang_rt.fuzzer provides it.
#ifndef TOKENPROXY_CFUZZER_H
#define TOKENPROXY_CFUZZER_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
