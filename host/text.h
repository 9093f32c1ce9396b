/*
 * text.h - a bounded text buffer for the messages the host program builds
 * piece by piece (the start-up check's reports, a checkpoint's list of
 * differences): an append that does not fit ends the text with "...", and
 * nothing is ever written past the buffer.
 */
#ifndef MNIST_DDP_TEXT_H
#define MNIST_DDP_TEXT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
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

#endif /* MNIST_DDP_TEXT_H */
