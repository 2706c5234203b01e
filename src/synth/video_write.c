/* Test videos (src/data/video_write.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#include "mact.h"
#include "base/err.h"
#include "synth/video_write.h"

struct mact_vw {
    char path[4096];
    AVFormatContext *oc;
    AVCodecContext *enc;
    AVStream *st;
    AVFrame *f;
    AVPacket *pkt;
    int64_t n;
    int header;
};

const char *mact_vw_codecs(void) { return "av1 h264 hevc mpeg4"; }

const char *mact_vw_encoder(const char *codec)
{
    static const char *const map[][3] = {{"av1", "libsvtav1", "libaom-av1"}, {"h264", "libx264", NULL},
                                         {"hevc", "libx265", NULL}, {"mpeg4", "mpeg4", NULL}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(codec, map[i][0])) continue;
        for (int k = 1; k < 3; k++)
            if (map[i][k] && avcodec_find_encoder_by_name(map[i][k])) return map[i][k];
        return NULL;
    }
    return NULL;
}

static uint8_t crc8(uint32_t v)
{
    uint8_t c = 0;
    for (int i = 2; i >= 0; i--) {
        c ^= (uint8_t)(v >> (8 * i));
        for (int b = 0; b < 8; b++) c = (uint8_t)(c & 0x80 ? (c << 1) ^ 0x07 : c << 1);
    }
    return c;
}

/* cell geometry: 8 columns of w/8 and 4 rows of h/6 (even, so the 4:2:0 chroma rows stay inside a cell row) */
static void cells(int w, int h, int *cw, int *ch) { *cw = w / 8; *ch = (h / 6) & ~1; }

static int send(mact_vw *w, AVFrame *f, char *err, size_t el)
{
    char b[AV_ERROR_MAX_STRING_SIZE];
    int r = avcodec_send_frame(w->enc, f);
    if (r < 0) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: encoding failed: %s", w->path, av_make_error_string(b, sizeof b, r));
    for (;;) {
        r = avcodec_receive_packet(w->enc, w->pkt);
        if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return 0;
        if (r < 0) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: encoding failed: %s", w->path, av_make_error_string(b, sizeof b, r));
        av_packet_rescale_ts(w->pkt, w->enc->time_base, w->st->time_base);
        w->pkt->stream_index = w->st->index;
        r = av_interleaved_write_frame(w->oc, w->pkt);
        av_packet_unref(w->pkt);
        if (r < 0) return mact_errf(err, el, MACT_ERR_IO, "%s: writing failed: %s", w->path, av_make_error_string(b, sizeof b, r));
    }
}

static void vw_free(mact_vw *w)
{
    if (!w) return;
    av_frame_free(&w->f);
    av_packet_free(&w->pkt);
    avcodec_free_context(&w->enc);
    if (w->oc) { avio_closep(&w->oc->pb); avformat_free_context(w->oc); }
    free(w);
}

int mact_vw_open(const char *path, const mact_vw_options *o, mact_vw **out, char *err, size_t el)
{
    *out = NULL;
    int av1 = !strcmp(o->codec, "av1"), h264 = !strcmp(o->codec, "h264"), hevc = !strcmp(o->codec, "hevc"), mp4v = !strcmp(o->codec, "mpeg4");
    if (!av1 && !h264 && !hevc && !mp4v) return mact_errf(err, el, MACT_ERR_INPUT, "video: unknown codec '%s' (%s)", o->codec, mact_vw_codecs());
    if (o->width < 64 || o->height < 48 || o->width > 4096 || o->height > 4096 || (o->width | o->height) & 1)
        return mact_errf(err, el, MACT_ERR_INPUT, "video: frame size %dx%d: width >= 64, height >= 48, both even, at most 4096", o->width, o->height);
    if (o->fps < 1 || o->fps > 1000) return mact_errf(err, el, MACT_ERR_INPUT, "video: fps %d out of 1..1000", o->fps);
    const char *en = mact_vw_encoder(o->codec);
    /* libsvtav1 1.4 refuses sides under 64 pixels (docs/bugs.md); libaom-av1 takes them */
    if (av1 && en && !strcmp(en, "libsvtav1") && (o->width < 64 || o->height < 64) && avcodec_find_encoder_by_name("libaom-av1"))
        en = "libaom-av1";
    const AVCodec *codec = en ? avcodec_find_encoder_by_name(en) : NULL;
    if (!codec) return mact_errf(err, el, MACT_ERR_UNSUPPORTED, "video: this FFmpeg has no %s encoder", o->codec);
    mact_vw *w = calloc(1, sizeof *w);
    if (!w) return mact_errf(err, el, MACT_ERR_NOMEM, "video: out of memory");
    snprintf(w->path, sizeof w->path, "%s", path);
    char b[AV_ERROR_MAX_STRING_SIZE];
    int rc = 0, r;
    AVDictionary *opt = NULL;
    if ((r = avformat_alloc_output_context2(&w->oc, NULL, "mp4", path)) < 0 || !(w->enc = avcodec_alloc_context3(codec)) ||
        !(w->st = avformat_new_stream(w->oc, NULL)) || !(w->f = av_frame_alloc()) || !(w->pkt = av_packet_alloc())) {
        rc = mact_errf(err, el, MACT_ERR_NOMEM, "%s: cannot set up the mp4 muxer", path);
        goto fail;
    }
    AVCodecContext *c = w->enc;
    c->width = o->width;
    c->height = o->height;
    c->pix_fmt = AV_PIX_FMT_YUV420P;
    c->time_base = (AVRational){1, o->fps};
    c->framerate = (AVRational){o->fps, 1};
    c->gop_size = o->g > 0 ? o->g : av1 ? 2 : 8;
    c->max_b_frames = av1 ? 0 : o->bf > 0 ? o->bf : 2;
    c->thread_count = 1;  /* one core per encoder: tests run on 2 shared cores */
    if (w->oc->oformat->flags & AVFMT_GLOBALHEADER) c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    if (!strcmp(en, "libsvtav1")) { av_dict_set(&opt, "preset", "12", 0); av_dict_set(&opt, "crf", "30", 0); }  /* LeRobot's */
    else if (!strcmp(en, "libaom-av1")) { av_dict_set(&opt, "cpu-used", "8", 0); av_dict_set(&opt, "crf", "30", 0); }
    else if (h264) { av_dict_set(&opt, "preset", "veryfast", 0); av_dict_set(&opt, "crf", "23", 0); }
    else if (hevc) { av_dict_set(&opt, "preset", "ultrafast", 0); av_dict_set(&opt, "crf", "28", 0); av_dict_set(&opt, "x265-params", "log-level=error", 0); }
    else { c->flags |= AV_CODEC_FLAG_QSCALE; c->global_quality = FF_QP2LAMBDA * 4; }
    if ((r = avcodec_open2(c, codec, &opt)) < 0) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: cannot open the %s encoder: %s", path, en, av_make_error_string(b, sizeof b, r));
        goto fail;
    }
    w->st->time_base = c->time_base;  /* a hint: the mp4 muxer raises it to >= 10000 ticks/s (15360 at 30 fps) */
    w->st->avg_frame_rate = c->framerate;
    if ((r = avcodec_parameters_from_context(w->st->codecpar, c)) < 0 || (r = avio_open(&w->oc->pb, path, AVIO_FLAG_WRITE)) < 0) {
        rc = mact_errf(err, el, MACT_ERR_IO, "%s: cannot create: %s", path, av_make_error_string(b, sizeof b, r));
        goto fail;
    }
    if ((r = avformat_write_header(w->oc, NULL)) < 0) {
        rc = mact_errf(err, el, MACT_ERR_IO, "%s: cannot write the mp4 header: %s", path, av_make_error_string(b, sizeof b, r));
        goto fail;
    }
    w->header = 1;
    w->f->format = c->pix_fmt;
    w->f->width = c->width;
    w->f->height = c->height;
    if ((r = av_frame_get_buffer(w->f, 0)) < 0) { rc = mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", path); goto fail; }
    av_dict_free(&opt);
    *out = w;
    return 0;
fail:
    av_dict_free(&opt);
    vw_free(w);
    return rc;
}

int mact_vw_frame(mact_vw *w, uint32_t number, int motion, int tint, char *err, size_t el)
{
    if (av_frame_make_writable(w->f) < 0) return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", w->path);
    AVFrame *f = w->f;
    int W = f->width, H = f->height, cw, ch;
    cells(W, H, &cw, &ch);
    uint32_t bits = (number & 0xffffff) << 8 | crc8(number & 0xffffff);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int cx = x / cw, cy = y / ch, v;
            if (cy < 4 && cx < 8) v = bits >> (31 - (cy * 8 + cx)) & 1 ? 235 : 16;
            else v = 40 + ((x * 3 + y * 2 + motion * 5) & 127);
            f->data[0][y * f->linesize[0] + x] = (uint8_t)v;
        }
    for (int y = 0; y < H / 2; y++)
        for (int x = 0; x < W / 2; x++) {
            int grid = y * 2 / ch < 4;
            f->data[1][y * f->linesize[1] + x] = (uint8_t)(grid ? 128 : 128 + ((tint * 37 + x) & 63) - 32);
            f->data[2][y * f->linesize[2] + x] = (uint8_t)(grid ? 128 : 128 - ((motion * 3 + y) & 63) + 32);
        }
    f->pts = w->n++;
    return send(w, f, err, el);
}

int mact_vw_close(mact_vw *w, char *err, size_t el)
{
    if (!w) return 0;
    int rc = send(w, NULL, err, el);
    if (!rc && w->header) {
        int r = av_write_trailer(w->oc);
        char b[AV_ERROR_MAX_STRING_SIZE];
        if (r < 0) rc = mact_errf(err, el, MACT_ERR_IO, "%s: cannot write the trailer: %s", w->path, av_make_error_string(b, sizeof b, r));
    }
    if (!rc && w->oc->pb && avio_closep(&w->oc->pb) < 0) rc = mact_errf(err, el, MACT_ERR_IO, "%s: write error", w->path);
    vw_free(w);
    return rc;
}

int mact_vw_read_number(const uint8_t *rgb, int W, int H, uint32_t *number)
{
    if (W < 64 || H < 48) return -1;
    int cw, ch;
    cells(W, H, &cw, &ch);
    uint32_t bits = 0;
    for (int i = 0; i < 32; i++) {
        /* the mean over the cell's inner half: its edges carry the codec's ringing */
        int x0 = (i % 8) * cw + cw / 4, y0 = (i / 8) * ch + ch / 4;
        long s = 0, n = 0;
        for (int y = y0; y < y0 + ch / 2; y++)
            for (int x = x0; x < x0 + cw / 2; x++, n++) {
                const uint8_t *p = rgb + ((size_t)y * W + x) * 3;
                s += p[0] + p[1] + p[2];
            }
        bits = bits << 1 | (s > n * 3 * 128);
    }
    uint32_t v = bits >> 8;
    if (crc8(v) != (bits & 0xff)) return -1;
    *number = v;
    return 0;
}
