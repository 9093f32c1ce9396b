/*
 * crc32.h - the one checksum: CRC-32 (IEEE 802.3), zlib's implementation, for
 * the data sets, the checkpoint files and the final parameters.
 */
#ifndef MNIST_DDP_CRC32_H
#define MNIST_DDP_CRC32_H

#include <stddef.h>
#include <stdint.h>

#include <zlib.h>

/* CRC-32 of n bytes continuing from crc (start with 0). zlib takes a uInt length: in pieces. */
static inline uint32_t crc32_bytes(uint32_t crc, const void *p, size_t n)
{
	const unsigned char *b = (const unsigned char *)p;
	uLong c = crc;
	while (n > 0) {
		uInt piece = n > (1u << 30) ? (1u << 30) : (uInt)n;
		c = crc32(c, b, piece);
		b += piece;
		n -= piece;
	}
	return (uint32_t)c;
}

#endif /* MNIST_DDP_CRC32_H */
