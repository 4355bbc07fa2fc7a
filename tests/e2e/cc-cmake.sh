#!/bin/bash
# A CMake project configures (compiler checks included) and builds with memlens-cc and
# memlens-c++ as its C and C++ compilers, and its program prints what clang-14's build prints.
. "$(dirname "$0")/cc-lib.bash"

command -v cmake >/dev/null || { echo "cmake is not installed"; exit 77; }
mkdir -p "$W/src"
cd "$W/src" || exit 1
cat >CMakeLists.txt <<'E'
cmake_minimum_required(VERSION 3.13)
project(mlcmake C CXX)
set(CMAKE_CXX_STANDARD 17)
add_library(shapes STATIC shapes.cpp)
add_executable(app main.c)
target_link_libraries(app shapes stdc++)
include(CheckCSourceCompiles)
check_c_source_compiles("int main(void) { return __builtin_popcount(7) - 3; }" HAVE_POPCOUNT)
if(NOT HAVE_POPCOUNT)
  message(FATAL_ERROR "probe failed")
endif()
E
cat >shapes.cpp <<'E'
#include <memory>
#include <vector>
struct Shape { virtual ~Shape() = default; virtual double area() const = 0; };
struct Sq : Shape { double s; explicit Sq(double v) : s(v) {} double area() const override { return s * s; } };
extern "C" double total_area(int n)
{
    std::vector<std::unique_ptr<Shape>> v;
    for (int i = 1; i <= n; i++) v.push_back(std::make_unique<Sq>(i));
    double t = 0;
    for (auto &p : v) t += p->area();
    return t;
}
E
cat >main.c <<'E'
#include <stdio.h>
double total_area(int n);
int main(void) { printf("%.1f\n", total_area(20)); return 0; }
E
build() { # <dir> <cc> <cxx>
    cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$2" \
        -DCMAKE_CXX_COMPILER="$3" >"$1.log" 2>&1 || { cat "$1.log"; fail "cmake configure with $2"; }
    cmake --build "$1" -j 2 >>"$1.log" 2>&1 || { cat "$1.log"; fail "cmake build with $2"; }
}
build ref clang-14 clang++-14
build ml "$BIN/memlens-cc" "$BIN/memlens-c++"
grep -q "The C compiler identification is Clang 14" ml.log || fail "cmake does not see clang 14"
./ref/app >want.txt && ./ml/app >got.txt || fail "run"
cmp want.txt got.txt || fail "output differs"
no_temps
echo "cmake project: ok ($(cat got.txt))"
