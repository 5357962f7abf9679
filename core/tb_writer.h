/* core/tb_writer.h — a TensorBoard event file writer (scalars only), with
 * no TensorFlow or protobuf library.
 *
 * The file is a TFRecord stream: per record the data length (uint64 little
 * endian), the masked CRC-32C of those 8 bytes (uint32 LE), the data, the
 * masked CRC-32C of the data; masked(c) = ((c >> 15) | (c << 17)) +
 * 0xa282ead8 (tensorflow/core/lib/hash/crc32c.h). Each record is a
 * tensorflow.Event protobuf (tensorflow/core/util/event.proto), encoded here
 * by hand:
 *   Event   { double wall_time = 1; int64 step = 2;
 *             oneof what { string file_version = 3; Summary summary = 5; } }
 *   Summary { repeated Value value = 1; }
 *   Value   { string tag = 1; float simple_value = 2; }
 *             (tensorflow/core/framework/summary.proto)
 * The first record is the file_version "brain.Event:2" event, as
 * TensorBoard's SummaryWriter writes it; then one event per scalar. The
 * file is named events.out.tfevents.<unix time, 10 digits>.<host>, like
 * tensorboardX / torch.utils.tensorboard's. docs/observability.md. */
#ifndef MT_CORE_TB_WRITER_H
#define MT_CORE_TB_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
  FILE *f;          /* NULL: closed / disabled */
  char path[4352];  /* the event file */
} mt_tb_writer;

/* Create dir (and its parents) and a new event file in it, with the
 * file_version record. Returns 0, or -1 with a message naming the path. */
int mt_tb_open(mt_tb_writer *w, const char *dir, char *err, size_t errlen);
/* Append one scalar event: tag, value (stored as float, as TensorBoard's
 * simple_value), step, wall_time = now. No-op when closed. */
void mt_tb_scalar(mt_tb_writer *w, const char *tag, double value, int64_t step);
/* Write buffered records to the file. */
void mt_tb_flush(mt_tb_writer *w);
void mt_tb_close(mt_tb_writer *w);

/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78) of n bytes,
 * continuing from crc (0 for a new checksum). */
uint32_t mt_crc32c(uint32_t crc, const void *data, size_t n);

#endif
