/* tools/common/cli.h's charts: one cairo routine for `mact eval`'s MAE per step and replanned trajectories and
 * `mact prune-analyze`'s SNR bars. Panels stacked over a shared x axis; each its own y range. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cairo/cairo.h>
#include "common/cli.h"

enum { LEFT = 70, RIGHT = 20, TOP = 40, GAP = 14, BOTTOM = 50 };

static int n_x(const cli_panel *p)
{
    int n = 0;
    for (int s = 0; s < p->n_series; s++) if (p->series[s].n > n) n = p->series[s].n;
    return n;
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
#define X(i) (LEFT + (bars ? ((i) + 0.5) / (n > 0 ? n : 1) : (n > 1 ? (double)(i) / (n - 1) : 0.5)) * pw)
#define Y(v) (y0 + ph - ((v) - lo) / (hi - lo) * ph)
    cairo_set_source_rgb(c, 0, 0, 0);
    cairo_set_line_width(c, 1);
    cairo_rectangle(c, LEFT, y0, pw, ph);
    cairo_stroke(c);
    char lab[64];
    cairo_set_font_size(c, 11);
    for (int i = 0; i <= 4; i++) {  /* y ticks */
        double v = lo + (hi - lo) * i / 4;
        snprintf(lab, sizeof lab, "%.3g", v);
        cairo_move_to(c, 6, Y(v) + 4);
        cairo_show_text(c, lab);
    }
    if (lo < 0 && hi > 0) { cairo_move_to(c, LEFT, Y(0)); cairo_line_to(c, LEFT + pw, Y(0)); cairo_stroke(c); }
    if (p->label) { cairo_move_to(c, 6, y0 + ph / 2); cairo_show_text(c, p->label); }
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
    cairo_set_source_rgb(c, 0, 0, 0);
    if (p->xlabels)
        for (int i = 0; i < n; i++) { cairo_move_to(c, X(i) - 6, y0 + ph + 14); cairo_show_text(c, p->xlabels[i]); }
    else if (last)
        for (int i = 0; i < 5 && n > 0; i++) {
            int k = n > 1 ? (int)lround((double)i * (n - 1) / 4) : 0;
            snprintf(lab, sizeof lab, "%d", k);
            cairo_move_to(c, X(k) - 4, y0 + ph + 16);
            cairo_show_text(c, lab);
        }
#undef X
#undef Y
}

int cli_chart_png(const char *path, const cli_chart *ch, char *err, size_t el)
{
    const double ph = ch->panel_height, pw = ch->width - LEFT - RIGHT;
    const int H = (int)(TOP + ch->n_panels * (ph + GAP) + BOTTOM);
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, ch->width, H);
    cairo_t *c = cairo_create(sf);
    cairo_set_source_rgb(c, 1, 1, 1);
    cairo_paint(c);
    cairo_select_font_face(c, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(c, 0, 0, 0);
    cairo_set_font_size(c, 13);
    cairo_move_to(c, LEFT, 22);
    cairo_show_text(c, ch->title ? ch->title : "");
    int legend = 0;  /* the first panel's labelled series, top right */
    for (int s = 0; ch->n_panels && s < ch->panels[0].n_series; s++) {
        const cli_series *r = &ch->panels[0].series[s];
        if (!r->label) continue;
        double x = ch->width - RIGHT - 170, y = TOP + 14 + 16 * legend++;
        cairo_set_source_rgb(c, r->rgb[0], r->rgb[1], r->rgb[2]);
        cairo_set_line_width(c, 2);
        if (r->dashed) { double d2[] = {6, 4}; cairo_set_dash(c, d2, 2, 0); }
        cairo_move_to(c, x, y); cairo_line_to(c, x + 30, y); cairo_stroke(c);
        cairo_set_dash(c, NULL, 0, 0);
        cairo_set_source_rgb(c, 0, 0, 0);
        cairo_set_font_size(c, 12);
        cairo_move_to(c, x + 38, y + 4);
        cairo_show_text(c, r->label);
    }
    for (int k = 0; k < ch->n_panels; k++)
        panel(c, &ch->panels[k], n_x(&ch->panels[k]), TOP + k * (ph + GAP), pw, ph, k == ch->n_panels - 1);
    cairo_set_font_size(c, 12);
    cairo_move_to(c, LEFT + pw / 2 - 40, H - 12);
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
