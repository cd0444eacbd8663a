// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * Loads the built provider module the way libibverbs does (dlopen with
 * RTLD_NOW, libibverbs already in the process): every symbol it needs must
 * resolve against this rdma-core, its constructor must run, and it must
 * export nothing (not even verbs_provider_mprdma, which stays local).
 */
#include <dlfcn.h>
#include <stdio.h>

#include <infiniband/verbs.h>

int main(int argc, char **argv)
{
	void *h;
	int failed = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s /path/to/libmprdma-rdmavNN.so\n",
			argv[0]);
		return 2;
	}
	/* Pull libibverbs in, as an application linked with it has. */
	printf("libibverbs at %p\n", (void *)&ibv_get_device_list);

	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("FAILED dlopen: %s\n", dlerror());
		return 1;
	}
	printf("ok     dlopen with RTLD_NOW\n");
	if (dlsym(h, "verbs_provider_mprdma") || dlsym(h, "mprdma_post_send") ||
	    dlsym(h, "mpr_dp_post_send")) {
		printf("FAILED provider exports its internals\n");
		failed++;
	} else {
		printf("ok     no exported internals\n");
	}
	dlclose(h);
	printf("%d passed, %d failed\n", failed ? 1 : 2, failed);
	return failed ? 1 : 0;
}
