/* Video frames of LeRobot datasets through FFmpeg's libraries (libavformat demuxes the mp4, libavcodec
 * decodes: AV1 through avcodec_find_decoder, i.e. libdav1d on Debian 12; H.264 with B-frames, HEVC, MPEG-4
 * Part 2; libswscale converts to RGB24). docs/datasets.md "Video" says what is decoded and why.
 *
 * Time: a frame's time is (pts - stream start_time) * time_base in seconds (best_effort_timestamp when the
 * frame has no pts), so t = 0 is the stream's first frame whatever the container's offset.
 * Colour: swscale with SWS_BILINEAR (what PyAV, LeRobot's decoder, passes) and the frame's own colour
 * matrix and range (BT.601 limited when untagged), as the ffmpeg CLI's `-sws_flags bilinear` does, so
 * `ffmpeg ... -sws_flags bilinear -pix_fmt rgb24` gives the same bytes (tests/test_dataset_video.sh).
 * Errors: negative MACT_ERR_* codes with a message naming the file (and t, the frame) in err. Nothing here
 * exits or aborts; frame sizes are capped by MACT_IMAGE_MAX_SIDE / MACT_IMAGE_MAX_PIXELS (io/image.h). */
#ifndef MACT_IO_VIDEO_H
#define MACT_IO_VIDEO_H
#include <stddef.h>
#include <stdint.h>
#include "mact.h"

typedef struct mact_video mact_video;
typedef struct {
    char codec[32];       /* the container's codec name: "av1", "h264", "hevc", "mpeg4", ... */
    int width, height;
    int64_t n_frames;     /* the stream's nb_frames, or the packets counted when the container lacks it */
    double fps;           /* the stream's average frame rate (guessed from r_frame_rate when absent) */
    double duration_s;    /* the stream's duration, else the container's; 0 when neither is known */
} mact_video_meta;

/* Opens path and its first video stream. threads: decoder threads (0 = 1). MACT_ERR_IO: missing or
 * unreadable; MACT_ERR_FORMAT: empty, not a container FFmpeg reads, no video stream, truncated (no moov);
 * MACT_ERR_UNSUPPORTED: no decoder for the codec; MACT_ERR_INPUT: frame size above the caps. */
int mact_video_open(const char *path, int threads, mact_video **out, char *err, size_t errlen);
/* The same over a file image in memory (read through a custom AVIOContext; data must outlive v); name is
 * what the messages call it (NULL: "(memory)"). */
int mact_video_open_memory(const void *data, size_t size, const char *name, int threads, mact_video **out, char *err,
                           size_t errlen);
void mact_video_close(mact_video *v);
const mact_video_meta *mact_video_info(const mact_video *v);

/* Decodes the frame whose presentation time is within tol seconds of t into out as RGB8 (out->data is
 * reused when it already has the size, else realloc'd; on error out keeps what it held, so mact_image_free
 * is always safe). Sequential calls with increasing t decode forward without seeking: steps of up to 2.5
 * frames always, longer ones (up to MACT_VIDEO_FORWARD_MAX_S) when no keyframe lies between the decoder's
 * position and t. Otherwise it seeks to the nearest earlier keyframe (av_seek_frame, AVSEEK_FLAG_BACKWARD)
 * and decodes forward, seeking further back when the keyframe found lies after t (B-frame streams index
 * keyframes by dts). No frame within tol (a gap, or t past the end): MACT_ERR_INPUT naming t, the nearest
 * frame's time and pts, and the file. */
#define MACT_VIDEO_FORWARD_MAX_S 4.0
int mact_video_frame_at(mact_video *v, double t, double tol, mact_image *out, char *err, size_t errlen);

/* The presentation times (seconds, as above) of every packet of the stream, sorted (malloc'd; the caller
 * frees), read by demuxing only; for frame counts over [from, to) ranges (v3.0 concatenated episodes).
 * The next mact_video_frame_at seeks. */
int mact_video_frame_times(mact_video *v, double **times, int64_t *n, char *err, size_t errlen);

/* Sets FFmpeg's process-wide log level to errors only (for command-line tools; the library never changes
 * it by itself, since it is a global of the process). */
void mact_video_quiet_logs(void);
#endif
