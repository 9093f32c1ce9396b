/* metrics_read.c - a --metrics file read back: see host/io/metrics_read.h. */
#include "io/metrics_read.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Whether a --metrics line is a record of `event`; *damaged when it names one but is not JSON. */
static int is_record(const char *line, const char *event, int *damaged, char *why, size_t whylen)
{
	json_error_t je;
	*damaged = 0;
	if (!strstr(line, event))
		return 0;
	json_t *root = json_loads(line, 0, &je);
	if (!root) {
		*damaged = 1;
		snprintf(why, whylen, "not JSON (%s, at character %d)", je.text, je.position);
		return 1;
	}
	json_t *e = json_object_get(root, "event");
	int yes = json_is_object(root) && json_is_string(e) && !strcmp(json_string_value(e), event);
	json_decref(root);
	return yes;
}

/*
 * The next line of f into *buf (grown as needed, *cap bytes; the newline
 * kept), at most METRICS_LINE_MAX bytes of it: a longer one's rest is read and
 * dropped, *too_long set. 0 at the end of the file, else 1.
 */
static int read_line(FILE *f, char **buf, size_t *cap, int *too_long)
{
	char chunk[65536];
	size_t len = 0;
	int any = 0;
	*too_long = 0;
	while (fgets(chunk, sizeof(chunk), f)) {
		size_t n = strlen(chunk);
		any = 1;
		if (len + n > METRICS_LINE_MAX)
			*too_long = 1;
		else {
			if (len + n + 1 > *cap) {
				size_t want = *cap ? *cap : 4096;
				while (want < len + n + 1)
					want *= 2;
				char *grown = realloc(*buf, want);
				if (!grown)
					die(1, "out of memory reading a --metrics line of %zu bytes", len + n);
				*buf = grown;
				*cap = want;
			}
			memcpy(*buf + len, chunk, n + 1);
			len += n;
		}
		if (n && chunk[n - 1] == '\n')
			break;
	}
	return any;
}

enum status metrics_last_event(const char *path, const char *event, const char *expected,
			       char **text, long *line, char *err, size_t errlen)
{
	struct stat st;
	char *buf = NULL, *record = NULL, why[256] = "";
	size_t cap = 0;
	long n = 0, at = 0;
	int damaged = 0;
	*text = NULL;
	*line = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: cannot open: %s", path,
				   strerror(errno));
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		return status_fail(err, errlen, STATUS_BAD_INPUT, "%s: not a regular file", path);
	}
	for (int too_long; read_line(f, &buf, &cap, &too_long);) {
		int bad;
		char bad_why[256] = "";
		n++;
		if (too_long) { /* its first METRICS_LINE_MAX bytes are kept */
			if (!strstr(buf, event))
				continue;
			bad = 1;
			snprintf(bad_why, sizeof(bad_why), "longer than %zu bytes", METRICS_LINE_MAX);
		} else if (!is_record(buf, event, &bad, bad_why, sizeof(bad_why))) {
			continue;
		}
		free(record);
		record = strdup(buf);
		if (!record)
			die(1, "out of memory reading %s", path);
		at = n;
		damaged = bad;
		snprintf(why, sizeof(why), "%s", bad_why);
	}
	int read_failed = ferror(f);
	free(buf);
	fclose(f);
	enum status rc = STATUS_BAD_INPUT;
	if (read_failed)
		status_fail(err, errlen, rc, "%s: read failed", path);
	else if (!record)
		status_fail(err, errlen, rc, "%s holds no %s record: expected %s", path, event,
			    expected);
	else if (damaged)
		status_fail(err, errlen, rc, "%s line %ld: the %s record is %s", path, at, event, why);
	else
		rc = STATUS_OK;
	if (rc != STATUS_OK) {
		free(record);
		return rc;
	}
	record[strcspn(record, "\n")] = '\0';
	*text = record;
	*line = at;
	return STATUS_OK;
}
