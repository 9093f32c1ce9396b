/*
 * text.h - a bounded text buffer for the messages the host program builds
 * piece by piece (the start-up check's reports, a checkpoint's list of
 * differences): an append that does not fit ends the text with "...", and
 * nothing is ever written past the buffer. And a float32 as the shortest
 * text that reads back as it (the loss lines, the settings' values).
 */
#ifndef MNIST_DDP_TEXT_H
#define MNIST_DDP_TEXT_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct text {
	char *buf;
	size_t len, used;
	int full; /* an append did not fit: the text ends with "..." */
};

static inline void text_init(struct text *t, char *buf, size_t len)
{
	t->buf = buf;
	t->len = len;
	t->used = 0;
	t->full = 0;
	if (buf && len)
		buf[0] = '\0';
}

static inline void text_add(struct text *t, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;

static inline void text_add(struct text *t, const char *fmt, ...)
{
	if (!t->buf || t->len < 4 || t->full)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < t->len - t->used) {
		t->used += (size_t)n;
		return;
	}
	t->full = 1;
	t->used = t->len - 1;
	memcpy(t->buf + t->len - 4, "...", 4);
}

/*
 * v in the fewest significant digits, up to max_digits, that read back as v;
 * a whole number with `decimals` digits after the point (below).
 */
static inline void text_float(float v, int max_digits, int decimals, char *buf, size_t len)
{
	for (int digits = 1; digits <= max_digits; digits++) {
		snprintf(buf, len, "%.*g", digits, (double)v);
		if (strtof(buf, NULL) == v)
			break;
	}
	/*
	 * A whole number below 1e8 reads better as "20.0" than as "2e+01" (numpy
	 * agrees). Written out from the shortest digits, not from v itself, so the
	 * fixed form has no more significant digits than the exponent form:
	 * 75332792.0f prints as "75332790.0", which reads back as the same float.
	 * (An exponent form of a value >= 1 is always a whole decimal number.)
	 * Settings are written as a command line takes them (decimals 0, 9 digits:
	 * text_float_exact): "300", not "300.0".
	 */
	if (strchr(buf, 'e') && fabsf(v) >= 1.0f && fabsf(v) < 1e8f)
		snprintf(buf, len, "%.*f", decimals, strtod(buf, NULL));
}

/*
 * Up to 9 digits, so that it always reads back as exactly v, and whole numbers
 * without ".0": a setting's value as a command line gives it (config.h).
 */
static inline void text_float_exact(float v, char *buf, size_t len)
{
	text_float(v, 9, 0, buf, len);
}

#endif /* MNIST_DDP_TEXT_H */
