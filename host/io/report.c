/* report.c - log lines, summary, progress display: see host/io/report.h. */
#include "io/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "text.h"

void report_format_float(float v, char *buf, size_t len)
{
	if (isnan(v)) /* one word for every NaN (printf writes one with its sign bit set as "-nan") */
		snprintf(buf, len, "nan");
	else
		text_float(v, 8, 1, buf, len);
}

void report_loss_line(FILE *f, int epoch, int step, float loss)
{
	char num[48];
	report_format_float(loss, num, sizeof(num));
	fprintf(f, "epoch: %d, step: %d, loss is %s\n", epoch, step, num);
	fflush(f);
}

void report_eval_line(FILE *f, int epoch, double accuracy)
{
	fprintf(f, "epoch: %d, test accuracy is %.4f\n", epoch, accuracy);
	fflush(f);
}

void report_epoch_line(FILE *f, const struct epoch_line *e)
{
	char loss[48];
	report_format_float(e->mean_loss, loss, sizeof(loss));
	fprintf(f, "epoch: %d, mean loss: %s, epoch time: %.3f s, images per second: %.0f", e->epoch,
		loss, e->seconds, e->seconds > 0 ? (double)e->images / e->seconds : 0.0);
	if (!isnan(e->test_accuracy))
		fprintf(f, ", test accuracy: %.4f", e->test_accuracy);
	fprintf(f, "\n");
	fflush(f);
}

void report_metrics_epoch(FILE *f, const struct epoch_line *e)
{
	fprintf(f,
		"{\"event\": \"epoch\", \"epoch\": %d, \"global_step\": %lld, \"mean_loss\": %.8g, "
		"\"losses\": %lld, \"seconds\": %.6f, \"images\": %lld, \"images_per_second\": %.1f",
		e->epoch, e->global_step, (double)e->mean_loss, e->losses, e->seconds, e->images,
		e->seconds > 0 ? (double)e->images / e->seconds : 0.0);
	if (!isnan(e->test_accuracy))
		fprintf(f, ", \"test_accuracy\": %.6f", e->test_accuracy);
	fprintf(f, "}\n");
	fflush(f);
}

void report_summary(FILE *f, const struct summary *s)
{
	char loss[48];
	report_format_float(s->final_loss, loss, sizeof(loss));
	double ips = s->train_seconds > 0 ? (double)s->images / s->train_seconds : 0.0;
	fprintf(f,
		"summary: model=%s backend=%s ranks=%d epochs=%d steps_per_epoch=%d images=%lld "
		"train_seconds=%.3f images_per_second=%.0f ",
		s->model, s->backend, s->ranks, s->epochs, s->steps_per_epoch, s->images,
		s->train_seconds, ips);
	if (isnan(s->test_accuracy))
		fprintf(f, "test_accuracy=nan");
	else
		fprintf(f, "test_accuracy=%.4f", s->test_accuracy);
	char epoch_loss[48];
	report_format_float(s->epoch_loss, epoch_loss, sizeof(epoch_loss));
	fprintf(f, " final_loss=%s param_crc32=%08x test_images=%lld epoch_loss=%s", loss,
		(unsigned)s->param_crc, s->test_images, epoch_loss);
	if (s->graph_nodes >= 0)
		fprintf(f, " graph_nodes=%lld", s->graph_nodes);
	if (s->backend_keys)
		fputs(s->backend_keys, f);
	if (s->backend_fallback)
		fprintf(f, " backend_fallback=%s", s->backend_fallback);
	fprintf(f, "\n");
	fflush(f);
}

void report_metrics_step(FILE *f, int epoch, int step, long long global_step, float loss,
			 double images_per_second, double elapsed)
{
	fprintf(f,
		"{\"epoch\": %d, \"step\": %d, \"global_step\": %lld, \"loss\": %.8g, "
		"\"images_per_second\": %.1f, \"elapsed\": %.6f}\n",
		epoch, step, global_step, (double)loss, images_per_second, elapsed);
}

void report_metrics_record(FILE *f, const char *event, const char *object)
{
	/* The object's members after the event's: "{" + "\"event\": ..., " + the rest. */
	const char *rest = object ? object + strspn(object, " ") : "";
	if (*rest != '{')
		die(1, "the %s record is not a JSON object", event);
	rest++;
	rest += strspn(rest, " ");
	fprintf(f, "{\"event\": \"%s\"%s %s\n", event, *rest == '}' ? "" : ",", rest);
	fflush(f);
}

void report_metrics_eval(FILE *f, int epoch, long long global_step, double accuracy,
			 long long images, double elapsed)
{
	fprintf(f,
		"{\"event\": \"eval\", \"epoch\": %d, \"global_step\": %lld, \"test_accuracy\": %.6f, "
		"\"test_images\": %lld, \"elapsed\": %.6f}\n",
		epoch, global_step, accuracy, images, elapsed);
	fflush(f);
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

void report_metrics_step_times(FILE *f, float *secs, int n)
{
	if (!n)
		return;
	qsort(secs, (size_t)n, sizeof(*secs), cmp_float);
	double sum = 0.0;
	for (int i = 0; i < n; i++)
		sum += secs[i];
	int p95 = (int)(0.95 * (n - 1) + 0.5);
	fprintf(f,
		"{\"event\": \"step_times\", \"steps\": %d, \"median_ms\": %.6f, \"p95_ms\": %.6f, "
		"\"mean_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f}\n",
		n, 1e3 * (n % 2 ? secs[n / 2] : 0.5 * (secs[n / 2 - 1] + secs[n / 2])),
		1e3 * secs[p95], 1e3 * sum / n, 1e3 * secs[0], 1e3 * secs[n - 1]);
}

/* 1 when file descriptor fd of process pid is a terminal (its /proc link names one). */
static int proc_fd_is_tty(pid_t pid, int fd)
{
	char path[64], target[256];
	snprintf(path, sizeof(path), "/proc/%ld/fd/%d", (long)pid, fd);
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return 0;
	target[n] = '\0';
	return !strncmp(target, "/dev/pts/", 9) || !strncmp(target, "/dev/tty", 8);
}

int progress_wanted(int mode)
{
	if (mode != 0)
		return mode == 1;
	if (isatty(fileno(stderr)))
		return 1;
	const char *files = getenv("OMPI_MCA_orte_output_filename");
	return !(files && files[0]) && proc_fd_is_tty(getppid(), 2);
}

void progress_start(struct progress *p, int enabled)
{
	p->tty = enabled ? stderr : NULL;
	p->last_draw = 0.0;
	p->drawn = 0;
}

void progress_update(struct progress *p, int epoch, int epochs, int step, int steps,
		     double images_per_second, double now)
{
	if (!p->tty || now - p->last_draw < 0.2)
		return;
	p->last_draw = now;
	p->drawn = 1;
	fprintf(p->tty, "\r\033[Kepoch: %d of 0-%d, step: %d of %d, %.0f images/s", epoch,
		epochs - 1, step, steps, images_per_second);
	fflush(p->tty);
}

void progress_clear(struct progress *p)
{
	if (p->tty && p->drawn) {
		fprintf(p->tty, "\r\033[K");
		fflush(p->tty);
		p->drawn = 0;
	}
}

void progress_end(struct progress *p)
{
	progress_clear(p);
}
