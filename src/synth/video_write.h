/* Test videos (development code, not in libmact): frames encoded with libavcodec's encoders into mp4 with
 * libavformat, each frame carrying a 24-bit number in its pixels so a decoder can read back which frame it
 * got despite lossy coding.
 *
 * The pattern: the top two thirds of the frame are an 8 x 4 grid of cells, each pure black (Y 16) or white
 * (Y 235) with neutral chroma: cell i (row-major) is bit 31 - i of (number << 8 | CRC-8(number)), so a bit
 * error is detected rather than read as another frame. The bottom third is a gradient that moves with the
 * frame, so the encoder has motion to predict (and B-frames to place). Frames need width >= 64 and
 * height >= 48 (cells of at least 8 x 8 pixels), both even (yuv420p). */
#ifndef MACT_DEV_VIDEO_WRITE_H
#define MACT_DEV_VIDEO_WRITE_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *codec;  /* "av1" (libsvtav1, LeRobot's default; libaom-av1 without it or for sides under
                           64, which libsvtav1 refuses), "h264" (libx264), "hevc"
                           (libx265), "mpeg4" (FFmpeg's MPEG-4 Part 2) */
    int width, height, fps;
    int g;              /* keyframe interval; 0: 2 for av1 (LeRobot's g=2), 8 for the others */
    int bf;             /* B-frames; 0: 2 for h264 / hevc / mpeg4 (pts order != dts order), none for av1 */
} mact_vw_options;

typedef struct mact_vw mact_vw;

/* The codecs, space-separated (static string). */
const char *mact_vw_codecs(void);
/* The libavcodec encoder used for codec ("libsvtav1", ...), NULL when this FFmpeg has none. */
const char *mact_vw_encoder(const char *codec);

int mact_vw_open(const char *path, const mact_vw_options *o, mact_vw **out, char *err, size_t errlen);
/* Appends one frame carrying number (24 bits); motion moves the gradient (and tint the colour, per camera). */
int mact_vw_frame(mact_vw *w, uint32_t number, int motion, int tint, char *err, size_t errlen);
/* Flushes the encoder and writes the trailer; frees w whatever happens. */
int mact_vw_close(mact_vw *w, char *err, size_t errlen);

/* The number carried by an RGB24 frame [h, w, 3] drawn by mact_vw_frame: 0 and *number, or -1 when the
 * frame is too small or the checksum does not match. */
int mact_vw_read_number(const uint8_t *rgb, int width, int height, uint32_t *number);
#endif
