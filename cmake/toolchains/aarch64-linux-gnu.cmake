# Cross-compiling iris for 64-bit Arm Linux (Debian's g++-aarch64-linux-gnu, the :arm64 -dev
# packages), its tests run under qemu-user: scripts/check_aarch64.sh.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# Test executables (gtest discovery included) run through qemu with the cross sysroot.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# Executables linked statically (configure with IRIS_STATIC=ON for the dependencies): qemu-user
# 7.2 (Debian 12) hangs in a dynamically linked arm64 program's first thread start, even a bare
# std::thread program, while the same program linked statically runs.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
