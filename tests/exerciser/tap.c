// SPDX-License-Identifier: GPL-2.0
/*
 * exerciser: the TAP helpers -- a check's "ok N - ..." / "not ok N - ..."
 * line (check, checkd, expect_err), "# ..." lines (diag), errno names
 * (ename), the errno of verbs that return one (rcerr), and the clock (now).
 */
#include "exerciser.h"

int n_tests, n_failed, verbose;

/*
 * -S (strict, for devices other than rxe): where rxe accepts what IBTA
 * forbids ("[rxe quirk]" rows of the modify_qp table) the device must refuse
 * with EINVAL; and a check that failed only because the device answered
 * EOPNOTSUPP (an object kind it does not implement yet) is reported as a TAP
 * SKIP naming that, not as a pass.
 */
int strict;
int shared_conns;

static void vresult(int ok, const char *detail, const char *fmt, va_list ap)
{
	int skip = !ok && strict && detail && strstr(detail, "EOPNOTSUPP");

	n_tests++;
	if (!ok && !skip)
		n_failed++;
	printf("%sok %d - ", ok || skip ? "" : "not ", n_tests);
	vprintf(fmt, ap);
	if (detail && *detail && strcmp(detail, "0 (success)"))
		printf(" (%s)", detail);
	if (skip)
		printf(" # SKIP not implemented by this device (EOPNOTSUPP)");
	putchar('\n');
	fflush(stdout);
}

void __attribute__((format(printf, 2, 3))) check(int ok, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vresult(ok, NULL, fmt, ap);
	va_end(ap);
}

void __attribute__((format(printf, 3, 4))) checkd(int ok, const char *detail, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vresult(ok, detail, fmt, ap);
	va_end(ap);
}

const char *ename(int e)
{
	static char buf[8][32];
	static int k;
	const char *n;

	if (e == 0)
		return "0 (success)";
	n = strerrorname_np(e);
	k = (k + 1) % 8;
	snprintf(buf[k], sizeof(buf[k]), "%s", n ? n : "?");
	if (!n)
		snprintf(buf[k], sizeof(buf[k]), "%d", e);
	return buf[k];
}

/* got: 0 for success, else the errno; want likewise. */
void __attribute__((format(printf, 3, 4))) expect_err(int got, int want, const char *fmt, ...)
{
	char detail[96];
	va_list ap;

	if (got == want)
		snprintf(detail, sizeof(detail), "%s", want ? ename(got) : "");
	else
		snprintf(detail, sizeof(detail), "got errno %s, want %s", ename(got), ename(want));
	va_start(ap, fmt);
	vresult(got == want, detail, fmt, ap);
	va_end(ap);
}

void __attribute__((format(printf, 1, 2))) diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* Verbs that return an errno directly: libibverbs promises a positive errno,
 * tolerate a provider returning it negated (and say so). */
int rcerr(int rc)
{
	if (rc < 0) {
		if (verbose)
			diag("provider returned negative errno %d", rc);
		return -rc;
	}
	return rc;
}

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}
