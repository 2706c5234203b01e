/* Video decoding through libavformat / libavcodec / libswscale (src/data/video.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
#include "mact.h"
#include "base/err.h"
#include "data/video.h"

/* PyAV (LeRobot's pyav backend) converts with SWS_BILINEAR and nothing else; same-size yuv420p -> RGB24
 * only interpolates chroma, so the flag decides the chroma upsampling and the rounding path. */
#define VIDEO_SWS_FLAGS SWS_BILINEAR
/* packets read when the container does not state the frame count (a 2^28-frame video is 100 days at 30 fps) */
#define VIDEO_MAX_PACKETS ((int64_t)1 << 28)

/* an in-memory file for mact_video_open_memory: libavformat reads it through these callbacks */
struct mem_file { const uint8_t *data; size_t size, pos; };

static int mem_read(void *opaque, uint8_t *buf, int n)
{
    struct mem_file *m = opaque;
    size_t left = m->size - m->pos;
    if (!left) return AVERROR_EOF;
    if ((size_t)n > left) n = (int)left;
    memcpy(buf, m->data + m->pos, (size_t)n);
    m->pos += (size_t)n;
    return n;
}

static int64_t mem_seek(void *opaque, int64_t off, int whence)
{
    struct mem_file *m = opaque;
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE) return (int64_t)m->size;
    int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (int64_t)m->pos : whence == SEEK_END ? (int64_t)m->size : -1;
    if (base < 0 || off < -base || off > (int64_t)m->size - base) return AVERROR(EINVAL);
    m->pos = (size_t)(base + off);
    return (int64_t)m->pos;
}

struct mact_video {
    char path[4096];
    struct mem_file mem;    /* mact_video_open_memory: the bytes, read through avio */
    AVIOContext *avio;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVStream *st;
    int si;
    AVPacket *pkt;
    AVFrame *frm;           /* scratch for the decoder's output */
    AVFrame *cur;           /* the last decoded frame: the decoder's position */
    int have_cur;
    double cur_t;
    int64_t cur_pts;
    int at_start;           /* nothing decoded since open or a seek to the stream start */
    int sent_eof, dec_eof;  /* the demuxer ran out / the decoder is drained */
    int64_t fed_dts;        /* dts of the last packet sent to the decoder (AV_NOPTS_VALUE: none since a seek) */
    struct SwsContext *sws;
    int sws_cs, sws_range;  /* the colour details last set on sws (-1: none) */
    double tb;              /* the stream's time base in seconds */
    int64_t start;          /* the stream's start_time (0 when unknown) */
    mact_video_meta meta;
};

static const char *averr(int e, char *b, size_t n)
{
    if (av_strerror(e, b, n) < 0) snprintf(b, n, "FFmpeg error %d", e);
    return b;
}

void mact_video_quiet_logs(void) { av_log_set_level(AV_LOG_ERROR); }

const mact_video_meta *mact_video_info(const mact_video *v) { return &v->meta; }

void mact_video_close(mact_video *v)
{
    if (!v) return;
    sws_freeContext(v->sws);
    av_frame_free(&v->frm);
    av_frame_free(&v->cur);
    av_packet_free(&v->pkt);
    avcodec_free_context(&v->dec);
    avformat_close_input(&v->fmt);  /* leaves a caller's (custom) AVIOContext alone */
    if (v->avio) { av_freep(&v->avio->buffer); avio_context_free(&v->avio); }
    free(v);
}

static int check_size(const mact_video *v, int w, int h, char *err, size_t el)
{
    if (w <= 0 || h <= 0 || w > MACT_IMAGE_MAX_SIDE || h > MACT_IMAGE_MAX_SIDE || (int64_t)w * h > MACT_IMAGE_MAX_PIXELS)
        return mact_errf(err, el, w <= 0 || h <= 0 ? MACT_ERR_FORMAT : MACT_ERR_INPUT,
                         "%s: frame size %dx%d outside 1..%d per side and %lld pixels", v->path, w, h,
                         MACT_IMAGE_MAX_SIDE, (long long)MACT_IMAGE_MAX_PIXELS);
    return 0;
}

/* Seeks to the last keyframe at or before t seconds (the stream start for t <= 0) and resets the decoder. */
static int seek_to(mact_video *v, double t, char *err, size_t el)
{
    /* a timestamp before the first sample makes mov (and most demuxers) take the first one */
    int64_t ts = t <= 0 ? v->start - ((int64_t)1 << 40) : v->start + (int64_t)floor(t / v->tb);
    int r = av_seek_frame(v->fmt, v->si, ts, AVSEEK_FLAG_BACKWARD);
    if (r < 0 && t > 0) r = av_seek_frame(v->fmt, v->si, v->start - ((int64_t)1 << 40), AVSEEK_FLAG_BACKWARD);
    if (r < 0) r = av_seek_frame(v->fmt, v->si, v->start, AVSEEK_FLAG_BACKWARD);  /* demuxers refusing times before the start */
    if (r < 0) {
        char b[AV_ERROR_MAX_STRING_SIZE];
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: seeking to %.6f s failed: %s", v->path, t, averr(r, b, sizeof b));
    }
    avcodec_flush_buffers(v->dec);
    v->sent_eof = v->dec_eof = 0;
    v->fed_dts = AV_NOPTS_VALUE;
    v->have_cur = 0;
    av_frame_unref(v->cur);
    v->at_start = t <= 0;
    return 0;
}

/* The next frame in presentation order into v->frm: 0, 1 at the end of the stream, or an error. */
static int decode_next(mact_video *v, char *err, size_t el)
{
    char b[AV_ERROR_MAX_STRING_SIZE];
    for (;;) {
        int r = avcodec_receive_frame(v->dec, v->frm);
        if (r == 0) return 0;
        if (r == AVERROR_EOF || (r == AVERROR(EAGAIN) && v->sent_eof)) { v->dec_eof = 1; return 1; }
        if (r != AVERROR(EAGAIN)) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: decoding failed: %s", v->path, averr(r, b, sizeof b));
        r = av_read_frame(v->fmt, v->pkt);
        if (r == AVERROR_EOF) {
            avcodec_send_packet(v->dec, NULL);  /* drain: the frames still held for reordering come out */
            v->sent_eof = 1;
            continue;
        }
        if (r < 0) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: reading a packet failed: %s", v->path, averr(r, b, sizeof b));
        if (v->pkt->stream_index != v->si) { av_packet_unref(v->pkt); continue; }
        int64_t pts = v->pkt->pts;
        v->fed_dts = v->pkt->dts != AV_NOPTS_VALUE ? v->pkt->dts : pts;
        r = avcodec_send_packet(v->dec, v->pkt);
        av_packet_unref(v->pkt);
        if (r < 0 && r != AVERROR(EAGAIN))
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s: decoding the packet at %.6f s (pts %lld) failed: %s", v->path,
                             pts == AV_NOPTS_VALUE ? NAN : (double)(pts - v->start) * v->tb, (long long)pts, averr(r, b, sizeof b));
    }
}

static int open_stream(mact_video *v, const char *path, int threads, char *err, size_t el);

int mact_video_open(const char *path, int threads, mact_video **out, char *err, size_t el)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb)) return mact_errf(err, el, MACT_ERR_IO, "%s: video missing (%s)", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return mact_errf(err, el, MACT_ERR_IO, "%s: not a regular file", path);
    if (sb.st_size == 0) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: empty file (0 bytes), not a video", path);
    mact_video *v = calloc(1, sizeof *v);
    if (!v) return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", path);
    snprintf(v->path, sizeof v->path, "%s", path);
    int rc = open_stream(v, path, threads, err, el);
    if (rc) { mact_video_close(v); return rc; }
    *out = v;
    return 0;
}

int mact_video_open_memory(const void *data, size_t size, const char *name, int threads, mact_video **out, char *err, size_t el)
{
    *out = NULL;
    if (!name) name = "(memory)";
    if (!size) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: empty file (0 bytes), not a video", name);
    mact_video *v = calloc(1, sizeof *v);
    if (!v) return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", name);
    snprintf(v->path, sizeof v->path, "%s", name);
    v->mem = (struct mem_file){.data = data, .size = size};
    enum { IO_BUF = 1 << 16 };
    uint8_t *buf = av_malloc(IO_BUF);
    if (buf && !(v->avio = avio_alloc_context(buf, IO_BUF, 0, &v->mem, mem_read, NULL, mem_seek))) av_free(buf);
    if (!v->avio || !(v->fmt = avformat_alloc_context())) { mact_video_close(v); return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", name); }
    v->fmt->pb = v->avio;
    v->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    int rc = open_stream(v, NULL, threads, err, el);
    if (rc) { mact_video_close(v); return rc; }
    *out = v;
    return 0;
}

/* the container, its first video stream and its decoder (v->fmt preallocated for memory input) */
static int open_stream(mact_video *v, const char *path, int threads, char *err, size_t el)
{
    v->sws_cs = v->sws_range = -1;
    v->fed_dts = AV_NOPTS_VALUE;
    char b[AV_ERROR_MAX_STRING_SIZE];
    if (!path) path = v->path;
    int rc, r = avformat_open_input(&v->fmt, v->avio ? NULL : path, NULL, NULL);
    if (r < 0) {
        rc = mact_errf(err, el, r == AVERROR(ENOENT) || r == AVERROR(EACCES) ? MACT_ERR_IO : MACT_ERR_FORMAT,
                       "%s: not a video FFmpeg can read (truncated, or not a container): %s", path, averr(r, b, sizeof b));
        goto fail;
    }
    if ((r = avformat_find_stream_info(v->fmt, NULL)) < 0) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: cannot read the stream parameters: %s", path, averr(r, b, sizeof b));
        goto fail;
    }
    const AVCodec *codec = NULL;
    v->si = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (v->si == AVERROR_DECODER_NOT_FOUND || (v->si >= 0 && !codec)) {
        int s = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
        rc = mact_errf(err, el, MACT_ERR_UNSUPPORTED, "%s: no decoder in this FFmpeg for codec %s", path,
                       s >= 0 ? avcodec_get_name(v->fmt->streams[s]->codecpar->codec_id) : "?");
        goto fail;
    }
    if (v->si < 0) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: no video stream", path); goto fail; }
    v->st = v->fmt->streams[v->si];
    AVCodecParameters *cp = v->st->codecpar;
    if ((rc = check_size(v, cp->width, cp->height, err, el))) goto fail;
    if (v->st->time_base.num <= 0 || v->st->time_base.den <= 0) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: bad time base", path); goto fail; }
    v->tb = av_q2d(v->st->time_base);
    v->start = v->st->start_time != AV_NOPTS_VALUE ? v->st->start_time : 0;
    if (!(v->dec = avcodec_alloc_context3(codec)) || !(v->pkt = av_packet_alloc()) || !(v->frm = av_frame_alloc()) ||
        !(v->cur = av_frame_alloc())) { rc = mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", path); goto fail; }
    if ((r = avcodec_parameters_to_context(v->dec, cp)) < 0) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s", path, averr(r, b, sizeof b)); goto fail; }
    v->dec->thread_count = threads > 0 ? threads : 1;
    v->dec->pkt_timebase = v->st->time_base;
    if ((r = avcodec_open2(v->dec, codec, NULL)) < 0) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: cannot open the %s decoder %s: %s", path, avcodec_get_name(cp->codec_id),
                       codec->name, averr(r, b, sizeof b));
        goto fail;
    }
    snprintf(v->meta.codec, sizeof v->meta.codec, "%s", avcodec_get_name(cp->codec_id));
    v->meta.width = cp->width;
    v->meta.height = cp->height;
    AVRational fr = v->st->avg_frame_rate.num > 0 && v->st->avg_frame_rate.den > 0 ? v->st->avg_frame_rate : v->st->r_frame_rate;
    v->meta.fps = fr.num > 0 && fr.den > 0 ? av_q2d(fr) : 0;
    v->meta.duration_s = v->st->duration != AV_NOPTS_VALUE && v->st->duration > 0 ? (double)v->st->duration * v->tb
                         : v->fmt->duration != AV_NOPTS_VALUE && v->fmt->duration > 0 ? (double)v->fmt->duration / AV_TIME_BASE : 0;
    v->at_start = 1;
    if (v->st->nb_frames > 0) v->meta.n_frames = v->st->nb_frames;
    else {
        double *t;
        if ((rc = mact_video_frame_times(v, &t, &v->meta.n_frames, err, el))) goto fail;
        free(t);
    }
    return 0;
fail:
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int mact_video_frame_times(mact_video *v, double **times, int64_t *n, char *err, size_t el)
{
    *times = NULL; *n = 0;
    int rc = seek_to(v, 0, err, el);
    if (rc) return rc;
    int64_t cap = 256, k = 0;
    double *t = malloc((size_t)cap * sizeof *t);
    if (!t) return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", v->path);
    char b[AV_ERROR_MAX_STRING_SIZE];
    for (;;) {
        int r = av_read_frame(v->fmt, v->pkt);
        if (r == AVERROR_EOF) break;
        if (r < 0) { free(t); return mact_errf(err, el, MACT_ERR_FORMAT, "%s: reading a packet failed: %s", v->path, averr(r, b, sizeof b)); }
        int64_t p = v->pkt->pts != AV_NOPTS_VALUE ? v->pkt->pts : v->pkt->dts;
        int mine = v->pkt->stream_index == v->si && p != AV_NOPTS_VALUE;
        av_packet_unref(v->pkt);
        if (!mine) continue;
        if (k == VIDEO_MAX_PACKETS) { free(t); return mact_errf(err, el, MACT_ERR_FORMAT, "%s: more than %lld frames", v->path, (long long)VIDEO_MAX_PACKETS); }
        if (k == cap) {
            double *q = realloc(t, (size_t)(cap *= 2) * sizeof *t);
            if (!q) { free(t); return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", v->path); }
            t = q;
        }
        t[k++] = (double)(p - v->start) * v->tb;
    }
    qsort(t, (size_t)k, sizeof *t, cmp_double);  /* packets come in decode order; B-frames reorder */
    if ((rc = seek_to(v, 0, err, el))) { free(t); return rc; }
    *times = t; *n = k;
    return 0;
}

/* f -> out as RGB24, with the frame's colour matrix and range as the ffmpeg CLI's scale filter takes them */
static int convert(mact_video *v, const AVFrame *f, mact_image *out, char *err, size_t el)
{
    int rc = check_size(v, f->width, f->height, err, el);
    if (rc) return rc;
    int w = f->width, h = f->height;
    v->sws = sws_getCachedContext(v->sws, w, h, (enum AVPixelFormat)f->format, w, h, AV_PIX_FMT_RGB24, VIDEO_SWS_FLAGS, NULL, NULL, NULL);
    if (!v->sws) {
        const char *pf = av_get_pix_fmt_name((enum AVPixelFormat)f->format);
        v->sws_cs = v->sws_range = -1;
        return mact_errf(err, el, MACT_ERR_UNSUPPORTED, "%s: cannot convert pixel format %s to RGB24", v->path, pf ? pf : "?");
    }
    int range = f->color_range == AVCOL_RANGE_JPEG;
    if ((int)f->colorspace != v->sws_cs || range != v->sws_range) {
        /* vf_scale (in_color_matrix=auto): the frame's matrix (sws_getCoefficients gives BT.601 for an
         * untagged stream) and range; the output table follows the input one */
        int *inv, *tab, in_full, out_full, bri, con, sat;
        sws_getColorspaceDetails(v->sws, &inv, &in_full, &tab, &out_full, &bri, &con, &sat);
        const int *c = sws_getCoefficients(f->colorspace);
        if (f->color_range != AVCOL_RANGE_UNSPECIFIED) in_full = range;
        sws_setColorspaceDetails(v->sws, c, in_full, c, out_full, bri, con, sat);
        v->sws_cs = (int)f->colorspace;
        v->sws_range = range;
    }
    if (!out->data || out->width != w || out->height != h) {
        /* a little slack past the last pixel: swscale's SIMD paths may store whole vectors */
        uint8_t *d = realloc(out->data, (size_t)w * h * 3 + 64);
        if (!d) return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory for a %dx%d frame", v->path, w, h);
        out->data = d;
        out->width = w;
        out->height = h;
    }
    uint8_t *dst[4] = {out->data, NULL, NULL, NULL};
    int ls[4] = {3 * w, 0, 0, 0};
    if (sws_scale(v->sws, (const uint8_t *const *)f->data, f->linesize, 0, h, dst, ls) != h)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: converting a %dx%d frame to RGB24 failed", v->path, w, h);
    return 0;
}

static double frame_time(const mact_video *v, const AVFrame *f, int64_t *pts)
{
    int64_t p = f->pts != AV_NOPTS_VALUE ? f->pts : f->best_effort_timestamp;
    *pts = p;
    return p == AV_NOPTS_VALUE ? NAN : (double)(p - v->start) * v->tb;
}

/* Decode forward from where the decoder is, or seek? Forward when t is ahead and near (up to 2.5 frame
 * intervals: reading every frame, or every other one, never seeks), or when no keyframe lies between the
 * last packet fed and t (a seek could not land closer; with LeRobot's g=2 there nearly always is one, and
 * decoding 4 s of frames instead of seeking cost 10x on a real 640x480 AV1 episode). Without a seek index:
 * forward up to MACT_VIDEO_FORWARD_MAX_S. */
static int go_forward(mact_video *v, double t, double tol)
{
    if (v->dec_eof || (!v->have_cur && !v->at_start)) return 0;
    double step = v->have_cur ? t - v->cur_t : t;
    if (v->have_cur && step <= 0) return 0;
    if (step <= 2.5 / (v->meta.fps > 0 ? v->meta.fps : 25)) return 1;
    if (step > MACT_VIDEO_FORWARD_MAX_S) return 0;
    if (avformat_index_get_entries_count(v->st) <= 0) return 1;
    const AVIndexEntry *e = avformat_index_get_entry_from_timestamp(v->st, v->start + (int64_t)floor((t - tol) / v->tb), AVSEEK_FLAG_BACKWARD);
    if (!e) return 1;  /* t before the first keyframe: a seek would go to the start, behind the decoder */
    return v->fed_dts != AV_NOPTS_VALUE && e->timestamp <= v->fed_dts;
}

int mact_video_frame_at(mact_video *v, double t, double tol, mact_image *out, char *err, size_t el)
{
    if (!isfinite(t) || !isfinite(tol) || tol < 0 || t < -tol)
        return mact_errf(err, el, MACT_ERR_INPUT, "%s: bad frame time t=%g s (tolerance %g s)", v->path, t, tol);
    if (v->have_cur && fabs(v->cur_t - t) <= tol) return convert(v, v->cur, out, err, el);
    if (v->dec_eof && v->have_cur && t > v->cur_t + tol)
        return mact_errf(err, el, MACT_ERR_INPUT, "%s: no frame within %g s of t=%.6f s: past the end (last frame at %.6f s, pts %lld)",
                         v->path, tol, t, v->cur_t, (long long)v->cur_pts);
    int forward = go_forward(v, t, tol);
    double back = 0;
    for (;;) {
        double target = t - tol - back;
        int rc;
        if (!forward && (rc = seek_to(v, target, err, el))) return rc;
        int first = !forward;
        int have_prev = v->have_cur;
        double prev_t = v->cur_t;
        int64_t prev_pts = v->cur_pts;
        for (;;) {
            rc = decode_next(v, err, el);
            if (rc < 0) return rc;
            if (rc == 1) {
                if (!have_prev) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: no decodable frame at or after %.6f s (t=%.6f s wanted)", v->path, target > 0 ? target : 0, t);
                return mact_errf(err, el, MACT_ERR_INPUT, "%s: no frame within %g s of t=%.6f s: past the end (last frame at %.6f s, pts %lld)",
                                 v->path, tol, t, prev_t, (long long)prev_pts);
            }
            int64_t pts;
            double ft = frame_time(v, v->frm, &pts);
            if (isnan(ft)) { av_frame_unref(v->frm); continue; }  /* no timestamp: cannot be placed */
            av_frame_unref(v->cur);
            av_frame_move_ref(v->cur, v->frm);
            v->have_cur = 1; v->cur_t = ft; v->cur_pts = pts; v->at_start = 0;
            if (fabs(ft - t) <= tol) return convert(v, v->cur, out, err, el);
            if (ft > t + tol) {
                /* the keyframe found lies after t: mov indexes keyframes by dts, which B-frames put before
                 * their pts; look further back unless the seek already went to the stream start */
                if (first && target > 0) break;
                int near_prev = have_prev && t - prev_t < ft - t;
                return mact_errf(err, el, MACT_ERR_INPUT, "%s: no frame within %g s of t=%.6f s (nearest frame at %.6f s, pts %lld)",
                                 v->path, tol, t, near_prev ? prev_t : ft, (long long)(near_prev ? prev_pts : pts));
            }
            first = 0;
            have_prev = 1; prev_t = ft; prev_pts = pts;
        }
        back = back > 0 ? back * 4 : 1.0;
        forward = 0;
    }
}
