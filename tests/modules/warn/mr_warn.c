// SPDX-License-Identifier: GPL-2.0
/*
 * A deliberately broken module for the runner's own test: it WARNs at load.
 * qemu/vm-run must report the run that loads it as failed.
 */
#include <linux/module.h>
#include <linux/bug.h>

static int __init mr_warn_init(void)
{
	WARN(1, "mr_warn: deliberate warning for the test runner's self-test\n");
	return 0;
}

static void __exit mr_warn_exit(void)
{
}

module_init(mr_warn_init);
module_exit(mr_warn_exit);
MODULE_DESCRIPTION("metaroce test runner self-test: a module that WARNs");
MODULE_LICENSE("GPL");
