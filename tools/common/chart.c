/* tools/common/cli.h's charts: one cairo routine for `mact eval`'s MAE per step and replanned trajectories and
 * `mact prune-analyze`'s SNR bars. Panels stacked over a shared x axis; each its own y range. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cairo/cairo.h>
#include "common/cli.h"

/* margins (pixels); LEGEND: the row under the title that the legend takes, outside every panel, so that no curve
 * runs through it */
enum { LEFT = 70, RIGHT = 20, TOP = 40, GAP = 14, BOTTOM = 50, LEGEND = 20 };

static int n_x(const cli_panel *p)
{
    int n = 0;
    for (int s = 0; s < p->n_series; s++) if (p->series[s].n > n) n = p->series[s].n;
    return n;
}

/* Heckbert's "nice number" (Graphics Gems, 1990) nearest x, from 1, 2, 2.5 and 5 x 10^k: a tick step a reader
 * counts in without arithmetic (0, 0.25, 0.5 rather than 0, 5.46, 10.9) */
static double nice_num(double x)
{
    const double e = pow(10, floor(log10(x))), f = x / e;
    return (f < 1.5 ? 1 : f < 2.25 ? 2 : f < 3.5 ? 2.5 : f < 7.5 ? 5 : 10) * e;
}

/* the step for about `intervals` ticks over range; integer: a whole step (x counts steps or blocks: 2.5 is 2) */
static double tick_step(double range, double intervals, int integer)
{
    double d = nice_num(range / intervals);
    if (integer && d < 10 && d != floor(d)) d = floor(d);
    return integer && d < 1 ? 1 : d;
}

/* multiples of step printed exactly and no longer: the decimals step needs (2.5 x 10^k one more than 10^k's) */
static void tick_label(char *out, size_t cap, double v, double step)
{
    if (fabs(v) < step * 1e-6) v = 0;  /* not "-0" */
    if (step >= 1e6 || step < 1e-4) { snprintf(out, cap, "%.3g", v); return; }
    int dec = 0;
    while (dec < 6 && fabs(step * pow(10, dec) - nearbyint(step * pow(10, dec))) > 1e-6 * step * pow(10, dec)) dec++;
    snprintf(out, cap, "%.*f", dec, v);
}

static double text_width(cairo_t *c, const char *s)
{
    cairo_text_extents_t e;
    cairo_text_extents(c, s, &e);
    return e.x_advance;
}

/* the axes of one panel at y0: grid lines and labels at the y ticks, tick marks at the x ticks (labelled on the last
 * panel), the panel's label turned up the left edge */
static void axes(cairo_t *c, const cli_panel *p, int n, int bars, double lo, double hi, double step, double y0,
                 double pw, double ph, int last)
{
#define X(i) (LEFT + (bars ? ((i) + 0.5) / (n > 0 ? n : 1) : (n > 1 ? (double)(i) / (n - 1) : 0.5)) * pw)
#define Y(v) (y0 + ph - ((v) - lo) / (hi - lo) * ph)
    char lab[64];
    cairo_set_font_size(c, 11);
    cairo_set_line_width(c, 1);
    for (long k = lround(lo / step); k <= lround(hi / step); k++) {
        const double v = (double)k * step, y = Y(v);
        cairo_set_source_rgb(c, 0.9, 0.9, 0.9);
        cairo_move_to(c, LEFT, y); cairo_line_to(c, LEFT + pw, y); cairo_stroke(c);
        cairo_set_source_rgb(c, 0, 0, 0);
        cairo_move_to(c, LEFT - 4, y); cairo_line_to(c, LEFT, y); cairo_stroke(c);
        tick_label(lab, sizeof lab, v, step);
        cairo_move_to(c, LEFT - 7 - text_width(c, lab), y + 4);
        cairo_show_text(c, lab);
    }
    cairo_set_source_rgb(c, 0, 0, 0);
    if (p->xlabels)
        for (int i = 0; i < n; i++) { cairo_move_to(c, X(i) - 6, y0 + ph + 14); cairo_show_text(c, p->xlabels[i]); }
    else if (n > 0) {
        const double xs = tick_step(n > 1 ? n - 1 : 1, 6, 1);
        for (long k = 0; k * xs <= n - 1; k++) {
            const double x = X(k * xs);
            cairo_move_to(c, x, y0 + ph); cairo_line_to(c, x, y0 + ph + 4); cairo_stroke(c);
            if (!last) continue;
            snprintf(lab, sizeof lab, "%ld", lround(k * xs));
            cairo_move_to(c, x - text_width(c, lab) / 2, y0 + ph + 17);
            cairo_show_text(c, lab);
        }
    }
    if (p->label) {
        cairo_save(c);
        cairo_move_to(c, 16, y0 + ph / 2 + text_width(c, p->label) / 2);
        cairo_rotate(c, -M_PI / 2);
        cairo_show_text(c, p->label);
        cairo_restore(c);
    }
#undef X
#undef Y
}

static void panel(cairo_t *c, const cli_panel *p, int n, double y0, double pw, double ph, int last)
{
    double lo = INFINITY, hi = -INFINITY;
    int bars = 0;
    for (int s = 0; s < p->n_series; s++) {
        bars |= p->series[s].bars;
        for (int i = 0; i < p->series[s].n; i++) {
            double v = p->series[s].y[i];
            if (isfinite(v)) { lo = fmin(lo, v); hi = fmax(hi, v); }
        }
    }
    if (!(hi >= lo)) lo = hi = 0;
    if (p->from_zero || bars) { lo = fmin(lo, 0); hi = fmax(hi, 0); }
    if (!(hi > lo)) hi = lo + 1;
    double pad = 0.08 * (hi - lo);
    hi += pad;
    if (!(p->from_zero || bars) || lo < 0) lo -= pad;
    /* the range out to whole ticks, so the first and last tick are the panel's edges */
    const double step = tick_step(hi - lo, ph >= 200 ? 5 : 2.5, 0);
    lo = floor(lo / step + 1e-9) * step;
    hi = ceil(hi / step - 1e-9) * step;
#define X(i) (LEFT + (bars ? ((i) + 0.5) / (n > 0 ? n : 1) : (n > 1 ? (double)(i) / (n - 1) : 0.5)) * pw)
#define Y(v) (y0 + ph - ((v) - lo) / (hi - lo) * ph)
    axes(c, p, n, bars, lo, hi, step, y0, pw, ph, last);
    cairo_set_source_rgb(c, 0, 0, 0);
    cairo_set_line_width(c, 1);
    cairo_rectangle(c, LEFT, y0, pw, ph);
    cairo_stroke(c);
    if (lo < 0 && hi > 0) { cairo_move_to(c, LEFT, Y(0)); cairo_line_to(c, LEFT + pw, Y(0)); cairo_stroke(c); }
    cairo_set_source_rgb(c, 0.6, 0.6, 0.6);
    double dash[] = {3, 3};
    cairo_set_dash(c, dash, 2, 0);
    for (int k = 0; k < p->n_marks; k++) { cairo_move_to(c, X(p->marks[k]), y0); cairo_line_to(c, X(p->marks[k]), y0 + ph); cairo_stroke(c); }
    cairo_set_dash(c, NULL, 0, 0);
    for (int s = 0; s < p->n_series; s++) {
        const cli_series *r = &p->series[s];
        if (r->bars) {
            double w = pw / (n > 0 ? n : 1) * 0.7;
            for (int i = 0; i < r->n; i++) {
                double v = isfinite(r->y[i]) ? r->y[i] : hi, ya = Y(v > 0 ? v : 0), yb = Y(v < 0 ? v : 0);
                const double *col = r->alt && r->alt[i] ? r->alt_rgb : r->rgb;
                cairo_set_source_rgb(c, col[0], col[1], col[2]);
                cairo_rectangle(c, X(i) - w / 2, ya, w, yb - ya);
                cairo_fill(c);
            }
            continue;
        }
        cairo_set_source_rgb(c, r->rgb[0], r->rgb[1], r->rgb[2]);
        cairo_set_line_width(c, 1.8);
        if (r->dashed) { double d2[] = {6, 4}; cairo_set_dash(c, d2, 2, 0); }
        for (int i = 0; i < r->n; i++) { if (i) cairo_line_to(c, X(i), Y(r->y[i])); else cairo_move_to(c, X(i), Y(r->y[i])); }
        cairo_stroke(c);
        cairo_set_dash(c, NULL, 0, 0);
    }
#undef X
#undef Y
}

/* the first panel's labelled series in one row under the title, right-aligned over the panels (outside them: no
 * data under it whatever its shape) */
static void legend(cairo_t *c, const cli_panel *p, double right, double y)
{
    double w = 0;
    cairo_set_font_size(c, 12);
    for (int s = 0; s < p->n_series; s++)
        if (p->series[s].label) w += 30 + 6 + text_width(c, p->series[s].label) + 18;
    double x = right - w + 18;
    for (int s = 0; s < p->n_series; s++) {
        const cli_series *r = &p->series[s];
        if (!r->label) continue;
        cairo_set_source_rgb(c, r->rgb[0], r->rgb[1], r->rgb[2]);
        cairo_set_line_width(c, 2);
        if (r->dashed) { double d2[] = {6, 4}; cairo_set_dash(c, d2, 2, 0); }
        cairo_move_to(c, x, y); cairo_line_to(c, x + 30, y); cairo_stroke(c);
        cairo_set_dash(c, NULL, 0, 0);
        cairo_set_source_rgb(c, 0, 0, 0);
        cairo_move_to(c, x + 36, y + 4);
        cairo_show_text(c, r->label);
        x += 30 + 6 + text_width(c, r->label) + 18;
    }
}

int cli_chart_png(const char *path, const cli_chart *ch, char *err, size_t el)
{
    const double ph = ch->panel_height, pw = ch->width - LEFT - RIGHT;
    int has_legend = 0;
    for (int s = 0; ch->n_panels && s < ch->panels[0].n_series; s++)
        has_legend |= ch->panels[0].series[s].label != NULL;
    const double top = TOP + (has_legend ? LEGEND : 0);
    const int H = (int)(top + ch->n_panels * (ph + GAP) + BOTTOM);
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, ch->width, H);
    cairo_t *c = cairo_create(sf);
    cairo_set_source_rgb(c, 1, 1, 1);
    cairo_paint(c);
    cairo_select_font_face(c, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(c, 0, 0, 0);
    cairo_set_font_size(c, 13);
    cairo_move_to(c, LEFT, 22);
    cairo_show_text(c, ch->title ? ch->title : "");
    if (has_legend) legend(c, &ch->panels[0], LEFT + pw, TOP + 4);
    for (int k = 0; k < ch->n_panels; k++)
        panel(c, &ch->panels[k], n_x(&ch->panels[k]), top + k * (ph + GAP), pw, ph, k == ch->n_panels - 1);
    cairo_set_source_rgb(c, 0, 0, 0);
    cairo_set_font_size(c, 12);
    cairo_move_to(c, LEFT + pw / 2 - text_width(c, ch->xlabel ? ch->xlabel : "") / 2, H - 12);
    cairo_show_text(c, ch->xlabel ? ch->xlabel : "");
    cairo_destroy(c);
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.png", path, (int)getpid());
    cairo_status_t st = cairo_surface_write_to_png(sf, tmp);
    int rc = st == CAIRO_STATUS_SUCCESS && rename(tmp, path) == 0 ? 0 : -1;
    if (rc) {
        unlink(tmp);
        snprintf(err, el, "cannot write %s: %s", path, st == CAIRO_STATUS_SUCCESS ? "rename failed" : cairo_status_to_string(st));
    }
    cairo_surface_destroy(sf);
    return rc;
}

void cli_chart_cleanup(void)
{
    cairo_debug_reset_static_data();
    void (*fc_fini)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "FcFini");
    if (fc_fini) fc_fini();
}
