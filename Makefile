# memlens build: the tool (C on LLVM-C 14), the runtime (archive and shared), tests, fuzz targets, ASan build.
LLVM_CONFIG ?= llvm-config-14
CC ?= gcc
ifeq ($(origin CC),default)
CC = gcc
endif
FUZZ_CC ?= clang-14
B ?= build
OPT ?= -O2

LLVM_INCDIR := $(shell $(LLVM_CONFIG) --includedir 2>/dev/null)
LLVM_LIBDIR := $(shell $(LLVM_CONFIG) --libdir 2>/dev/null)
WARN := -Wall -Wextra -Werror
BASE_CFLAGS := -std=c11 -g $(WARN) -D_GNU_SOURCE -Iinclude -Isrc -I$(B)/gen -isystem $(LLVM_INCDIR) \
	-DML_CLANG='"clang-14"'
CFLAGS ?= $(OPT)
TOOL_LIBS := -L$(LLVM_LIBDIR) -lLLVM-14 -lcapstone -lZydis -lzstd -Wl,-rpath,$(LLVM_LIBDIR) -lstdc++ -lm -lpthread
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# The malloc-family interposers (heap events) are an archive of their own, linked only into
# programs whose instrumented code asks for them (docs/profile-modules.md, "lifetime").
RT_HEAP_SRC := src/runtime/heap.c
# Every room below src/ except cli/ and runtime/ forms the tool library.
LIB_SRC := $(sort $(wildcard src/format/*.c src/report/*.c src/instrument/ir/*.c \
	src/instrument/asm/*.c src/bb/*.c src/analyze/*.c src/backend/*.c \
	src/backend/modules/*.c))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
RT_SRC := $(sort $(filter-out $(RT_HEAP_SRC),$(wildcard src/runtime/*.c))) src/format/profile.c \
	src/format/trace.c src/format/safefile.c
UNIT_SRC := $(sort $(wildcard tests/unit/test-*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz-*.c))

LIB_OBJ := $(LIB_SRC:%.c=$(B)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(B)/obj/%.o)
# bin/memlens leaves out the commands that need LLVM (cc, instrument, bb) and runs
# libexec/memlens/memlens-llvm, the full build, for them: every other command then starts without
# loading libLLVM (~20 ms of CPU, 50 MiB). See src/cli/main.c.
LLVM_CLI_SRC := src/cli/cc-asm.c src/cli/cc-link.c src/cli/cmd-bb.c src/cli/cmd-cc.c \
	src/cli/cmd-instrument.c src/cli/main.c
LIGHT_OBJ := $(filter-out $(LLVM_CLI_SRC:%.c=$(B)/obj/%.o),$(CLI_OBJ)) $(B)/obj/src/cli/main-light.o
LIGHT_LIBS := -Wl,--as-needed -lzstd -lstdc++ -lm -lpthread
RT_OBJ := $(RT_SRC:%.c=$(B)/rt/%.o)
ASAN_LIB_OBJ := $(LIB_SRC:%.c=$(B)/asan/obj/%.o)
ASAN_OBJ := $(ASAN_LIB_OBJ) $(CLI_SRC:%.c=$(B)/asan/obj/%.o)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(B)/fuzz/%)

TOOL_TREE = $(1)/bin/memlens $(1)/bin/memlens-cc $(1)/bin/memlens-c++ \
	$(1)/lib/libmemlens-rt.a $(1)/lib/libmemlens-heap.a $(1)/lib/libmemlens-rt.so \
	$(1)/include/memlens.h

# Cross runtimes, one per target triple, built when that target's libc and binutils are
# installed (Debian libc6-dev-arm64-cross, binutils-aarch64-linux-gnu); memlens cc picks
# <prefix>/lib/<triple>/libmemlens-rt.a for --target=<triple>. See docs/cc.md.
CROSS := $(foreach t,aarch64-linux-gnu,$(if $(and $(wildcard /usr/$(t)/include/stdio.h),\
	$(shell command -v $(t)-ld)),$(t)))
CROSS_RT := $(foreach t,$(CROSS),$(B)/lib/$(t)/libmemlens-rt.a $(B)/lib/$(t)/libmemlens-heap.a \
	$(B)/lib/$(t)/libmemlens-rt.so)

.SECONDARY:
.PHONY: all deps asan unit fuzz test demo bench clean format install
all: $(call TOOL_TREE,$(B)) $(B)/libexec/memlens/memlens-llvm $(CROSS_RT)
asan: $(call TOOL_TREE,$(B)/asan)
unit: $(UNIT_BIN)
fuzz: $(FUZZ_BIN)

deps:
	@scripts/deps.sh

# The runtime's global symbols, which memlens cc exports from executables by name (cc-link.c).
$(B)/gen/rt-exports.h: $(B)/rt/memlens-rt.o
	@mkdir -p $(dir $@)
	nm -g --defined-only $< | awk 'NF == 3 { printf "\"%s\",\n", $$3 }' >$@.tmp && mv $@.tmp $@
$(B)/obj/src/cli/cc-link.o $(B)/asan/obj/src/cli/cc-link.o: $(B)/gen/rt-exports.h

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(B)/asan/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 $(SAN) -MMD -MP -c $< -o $@

# The runtime runs inside profiled programs: PIC, hidden symbols, never sanitized.
$(B)/rt/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -fPIC -fvisibility=hidden -fno-stack-protector -MMD -MP -c $< -o $@

$(B)/lib/libmemlens.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# Unit tests link the sanitized build of the library.
$(B)/asan/lib/libmemlens.a: $(ASAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(B)/obj/src/cli/main-light.o: src/cli/main.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -DML_LIGHT -MMD -MP -c $< -o $@

$(B)/bin/memlens: $(LIGHT_OBJ) $(B)/lib/libmemlens.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(LIGHT_OBJ) $(B)/lib/libmemlens.a $(LIGHT_LIBS)

$(B)/libexec/memlens/memlens-llvm: $(CLI_OBJ) $(B)/lib/libmemlens.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(B)/lib/libmemlens.a $(TOOL_LIBS)

$(B)/asan/bin/memlens: $(ASAN_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(SAN) -o $@ $^ $(TOOL_LIBS)

%/bin/memlens-cc %/bin/memlens-c++: %/bin/memlens
	ln -sf memlens $*/bin/memlens-cc
	ln -sf memlens $*/bin/memlens-c++

# The malloc family runtime/heap.c interposes (weak) for heap events.
RT_HEAP_API := malloc calloc realloc reallocarray free memalign aligned_alloc posix_memalign \
	valloc pvalloc
RT_HEAP_KEEP := --wildcard --keep-global-symbol='__memlens_*' \
	$(foreach f,$(RT_HEAP_API),--keep-global-symbol=$(f))

# One relocatable object whose only global symbols are the runtime's entry points, so that
# its internals (ml_profile_*, ...) can never clash with the program's own symbols.
$(B)/rt/memlens-rt.o: $(RT_OBJ)
	ld -r -o $@.tmp $^
	objcopy --wildcard --keep-global-symbol='__memlens_*' --keep-global-symbol=pthread_create \
		$@.tmp $@
	rm -f $@.tmp

$(B)/rt/memlens-heap.o: $(RT_HEAP_SRC:%.c=$(B)/rt/%.o)
	objcopy $(RT_HEAP_KEEP) $< $@

%/lib/libmemlens-rt.a: $(B)/rt/memlens-rt.o
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

%/lib/libmemlens-heap.a: $(B)/rt/memlens-heap.o
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# The same runtime for instrumented shared libraries (memlens cc -shared links it as needed):
# never unloaded, so that it outlives every plugin that brought it (docs/cc.md).
RT_SO_FLAGS := -shared -Wl,-soname,libmemlens-rt.so -Wl,-z,nodelete -Wl,-z,defs -lpthread -ldl
%/lib/libmemlens-rt.so: $(B)/rt/memlens-rt.o $(B)/rt/memlens-heap.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(RT_SO_FLAGS)

# The same runtime cross-compiled by clang-14 for one target triple, linked by its binutils.
define CROSS_RULES
$(B)/rt-$(1)/%.o: %.c
	@mkdir -p $$(dir $$@)
	clang-14 --target=$(1) $(BASE_CFLAGS) -O2 -fPIC -fvisibility=hidden -fno-stack-protector \
		-MMD -MP -c $$< -o $$@

$(B)/rt-$(1)/memlens-rt.o: $(RT_SRC:%.c=$(B)/rt-$(1)/%.o)
	$(1)-ld -r -o $$@.tmp $$^
	$(1)-objcopy --wildcard --keep-global-symbol='__memlens_*' \
		--keep-global-symbol=pthread_create $$@.tmp $$@
	rm -f $$@.tmp

$(B)/rt-$(1)/memlens-heap.o: $(RT_HEAP_SRC:%.c=$(B)/rt-$(1)/%.o)
	$(1)-objcopy $(RT_HEAP_KEEP) $$< $$@

$(B)/lib/$(1)/libmemlens-heap.a: $(B)/rt-$(1)/memlens-heap.o
	@mkdir -p $$(dir $$@)
	rm -f $$@ && $(1)-ar rcs $$@ $$^

$(B)/lib/$(1)/libmemlens-rt.a: $(B)/rt-$(1)/memlens-rt.o
	@mkdir -p $$(dir $$@)
	rm -f $$@ && $(1)-ar rcs $$@ $$^

$(B)/lib/$(1)/libmemlens-rt.so: $(B)/rt-$(1)/memlens-rt.o $(B)/rt-$(1)/memlens-heap.o
	@mkdir -p $$(dir $$@)
	clang-14 --target=$(1) -o $$@ $$^ $(RT_SO_FLAGS)
endef
$(foreach t,$(CROSS),$(eval $(call CROSS_RULES,$(t))))

%/include/memlens.h: include/memlens.h
	@mkdir -p $(dir $@)
	cp $< $@

$(B)/tests/%: tests/unit/%.c $(B)/asan/lib/libmemlens.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 $(SAN) -o $@ $< $(B)/asan/lib/libmemlens.a \
		-lcmocka $(TOOL_LIBS)

# libFuzzer targets link one library built once with clang, coverage and sanitizers (building
# every source again per target made the fuzz step most of the build's time).
FUZZ_SAN := -fsanitize=address,undefined
$(B)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(BASE_CFLAGS) -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(B)/fuzz/lib/libmemlens.a: $(LIB_SRC:%.c=$(B)/fuzz/obj/%.o)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(B)/fuzz/%: tests/fuzz/%.c $(B)/fuzz/lib/libmemlens.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(BASE_CFLAGS) -O1 $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $< \
		$(B)/fuzz/lib/libmemlens.a $(TOOL_LIBS)

# The build uses every core (CI has 2 and 30 minutes); the tests run one at a time.
test: deps
	$(MAKE) -j$(shell nproc) all asan unit fuzz
	tests/run.sh

demo: deps
	$(MAKE) -j$(shell nproc) all
	examples/demo.sh

bench: deps
	$(MAKE) -j$(shell nproc) all
	bench/run.sh

format:
	clang-format -i $(LIB_SRC) $(CLI_SRC) $(RT_SRC) $(RT_HEAP_SRC) $(UNIT_SRC) $(FUZZ_SRC) include/memlens.h

PREFIX ?= /usr/local
install: all
	install -d $(PREFIX)/bin $(PREFIX)/lib $(PREFIX)/include
	install -m755 $(B)/bin/memlens $(PREFIX)/bin/memlens
	install -D -m755 $(B)/libexec/memlens/memlens-llvm $(PREFIX)/libexec/memlens/memlens-llvm
	ln -sf memlens $(PREFIX)/bin/memlens-cc
	ln -sf memlens $(PREFIX)/bin/memlens-c++
	install -m644 $(B)/lib/libmemlens-rt.a $(PREFIX)/lib/libmemlens-rt.a
	install -m644 $(B)/lib/libmemlens-heap.a $(PREFIX)/lib/libmemlens-heap.a
	install -m755 $(B)/lib/libmemlens-rt.so $(PREFIX)/lib/libmemlens-rt.so
	for t in $(CROSS); do install -D -m644 $(B)/lib/$$t/libmemlens-rt.a \
		$(PREFIX)/lib/$$t/libmemlens-rt.a && install -m644 $(B)/lib/$$t/libmemlens-heap.a \
		$(PREFIX)/lib/$$t/libmemlens-heap.a && install -m755 $(B)/lib/$$t/libmemlens-rt.so \
		$(PREFIX)/lib/$$t/libmemlens-rt.so || exit 1; done
	install -m644 include/memlens.h $(PREFIX)/include/memlens.h

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)
