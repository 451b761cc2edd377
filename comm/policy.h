// The quick-reduce policy: which calls quick-reduce takes (should_all_reduce)
// and which codec a call runs with. One shared function of (size, dtype,
// world size, regime, config), so the GPU and host backends always agree.
//
//   if (ShouldAllReduce(config, bytes, dtype, ws, &why)) {
//     Codec codec = EffectiveCodec(config, config.regime, bytes);
//     ...
//   }
//
// All functions are pure and thread-safe (ShouldAllReduce may log once).
#ifndef QR_COMM_POLICY_H_
#define QR_COMM_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "comm/config.h"
#include "kernels/types.h"

namespace qr {

// "Never eligible": the min size for regime NONE or an unsupported world size.
inline constexpr int64_t kNeverEligible = std::numeric_limits<int64_t>::max();

// The built-in min-size floor (bytes) of `platform` for (dtype, world size
// 2/4/8, regime); bf16 uses the fp16 row when cast_bf16_to_fp16 is on.
// AMD: DESIGN.md's table (vLLM's, tuned on MI300X); NVIDIA: the rows measured
// for our kernels on H200 (all 0: no floor); host: 0. kNeverEligible for
// kNone, an invalid dtype, or a world size not 2/4/8.
int64_t MinSizeBytes(Platform platform, DType dtype, int world_size, Regime regime,
                     bool cast_bf16_to_fp16);

// The floor that applies under `config`: the QR_MIN_SIZE_BYTES_MB override if
// set, else the QR_MIN_SIZE_TABLE row if the file has one, else the built-in
// table of config.platform, for config.regime.
int64_t EffectiveMinSizeBytes(const Config& config, DType dtype, int world_size);

// True when quick-reduce should take an all-reduce of `bytes` bytes: regime
// not NONE, dtype fp16/bf16, world size 2/4/8, INT3 only at world size 2,
// bytes % 16 == 0 and floor <= bytes <= config.max_size_bytes. Otherwise
// false, with the reason in *why_not when given. Declining INT3 at a world
// size other than 2 is logged (warning, once per process). The group's
// health is no input on purpose: every rank must give the same answer for
// the same call, before and after a peer dies (DESIGN.md).
bool ShouldAllReduce(const Config& config, size_t bytes, DType dtype, int world_size,
                     std::string* why_not = nullptr);

// The built-in largest size (bytes) that runs one-shot at world size 2/4/8
// (comm/policy.cc says which are measured); 0 for other world sizes.
int64_t DefaultOneShotMaxBytes(int world_size);
// The built-in ceiling of a call of `format` whose two-shot would run
// `codec`: DefaultOneShotMaxBytes(world_size), or lower where two-shot with
// that codec was measured faster than one-shot (comm/policy.cc cites the
// tables: fp16 INT4 and INT3 at world size 2, 3 MiB).
int64_t DefaultOneShotMaxBytes(int world_size, WorkFormat format, Codec codec);

// The largest message (bytes) that runs one-shot: QR_ONE_SHOT_MAX_KB if set,
// else DefaultOneShotMaxBytes, capped by what the one-shot region holds
// (kernels/geometry.h OneShotMaxBytes); 0 = never. Ranks that
// disagree on it would run different algorithms for one call, so
// Communicator::Join refuses a group whose members differ.
uint64_t OneShotCeilingBytes(const Config& config, int world_size);
// The ceiling of one call: OneShotCeilingBytes(config, world_size), capped
// further for the (format, codec) pairs whose two-shot is faster below it
// (the same caps as DefaultOneShotMaxBytes(world_size, format, codec)).
// QR_ONE_SHOT_MAX_KB caps every codec; it does not lift a codec's cap. It is
// a function of OneShotCeilingBytes(config, world_size) alone, so ranks that
// pass the join's check agree on every call.
uint64_t OneShotCeilingBytes(const Config& config, int world_size, WorkFormat format, Codec codec);

// How a call that ShouldAllReduce took travels: kOneShot when 0 < bytes <=
// OneShotCeilingBytes(config, world_size, format, codec), else kTwoShot.
// `codec` is the one two-shot would run (EffectiveCodec), `format` the
// call's (WorkFormatOf(dtype, cast)). Every rank computes the same answer
// from the same inputs, as for the codec.
Algorithm ChooseAlgorithm(const Config& config, size_t bytes, int world_size, WorkFormat format,
                          Codec codec);

// The codec a call of `bytes` bytes runs with under `regime` (not kNone):
// FP below config.quantization_min_size_bytes, else the regime's codec.
Codec EffectiveCodec(const Config& config, Regime regime, size_t bytes);

}  // namespace qr

#endif  // QR_COMM_POLICY_H_
