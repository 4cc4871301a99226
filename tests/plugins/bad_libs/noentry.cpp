// A shared library that is not a kiln plugin library (no entry points).
extern "C" int someUnrelatedFunction() { return 1; }
