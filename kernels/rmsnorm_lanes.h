// The fixed shape of the RMSNorm sum of squares (kernels/rmsnorm_reference.h
// defines the order), constexpr only, for the host reference and the GPU
// epilogue (kernels/gpu/rmsnorm_epilogue.cu) alike.
#ifndef QR_KERNELS_RMSNORM_LANES_H_
#define QR_KERNELS_RMSNORM_LANES_H_

namespace qr::kernels {

// The sum of squares runs over kRmsNormLanes lanes. Chunk c of a row (its
// values 8c .. 8c+7, 16 bytes) belongs to lane c % kRmsNormLanes.
inline constexpr int kRmsNormLanes = 256;
inline constexpr int kRmsNormChunkElems = 8;

}  // namespace qr::kernels

#endif  // QR_KERNELS_RMSNORM_LANES_H_
