# SPDX-License-Identifier: GPL-2.0
#
#   make                 build metaroce.ko against the cached test kernel
#                        (qemu/build-kernel.sh builds it first if needed)
#   make KDIR=DIR        build against any Rust-enabled kernel >= 6.12 with
#                        CONFIG_INFINIBAND, e.g. /lib/modules/$(uname -r)/build
#   make clean
#
# LLVM=1 is required: the kernel's Rust support needs a clang-built kernel.

KDIR ?= $(shell "$(CURDIR)/qemu/build-kernel.sh")
export PATH := $(or $(HOME),/root)/.cargo/bin:$(PATH)

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=1 modules

clean:
	rm -f rust/ffi/bindings_generated.rs
	rm -rf *.o *.ko *.mod *.mod.c .*.cmd .*.o rust/*.o rust/.*.cmd rust/.*.d rust/ffi/*.o \
		rust/ffi/.*.cmd rust/*.rmeta rust/*.d modules.order Module.symvers .tmp_versions
	cd tests/modules/warn && rm -rf *.o *.ko *.mod *.mod.c .*.cmd .*.o modules.order Module.symvers

.PHONY: all modules clean
