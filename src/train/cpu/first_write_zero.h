// Weight gradients zeroed by their first write.
//
// Every step zeroes the gradients (zero_grad) and the backward then adds each weight's gradient to
// them (dW += dyᵀ·x, layers.h). For GPT-2 124M that is 500 MB written with zeros, then read back
// from memory by the weight products — a gigabyte of traffic each step that carries nothing.
// Instead, a range that a weight product wrote in full is left as it is by the next zeroing and
// marked *pending*, and the product overwrites it (dW = dyᵀ·x, cpu::COut::Overwrite): the same bits
// as adding to zeros, without zeroing it or reading it.
//
//   zero_gradients(g, n)     zero_grad: zeroes [g, g + n) except the noted ranges, which become pending
//   first_write(dW, n)       a product is about to add into [dW, dW + n): true when that range is
//                            pending — the caller must then overwrite all of it — else false (add);
//                            a range inside a zeroed buffer is noted for the next zeroing
//   finish_gradients(g, n)   the backward is done: zeroes what is still pending (a product that did
//                            not run: a frozen layer, a batch without a counted position)
//   forget_gradients(g, n)   the buffer's owner goes away: zeroes what is pending, drops its ranges
//
// The contract: between zero_gradients and finish_gradients nothing but the products that noted a
// range writes into it before its first_write — true of the backward of every family here (each
// weight matrix has one product; a tied embedding's product comes before the encoder's adds).
// Nothing reads gradients while any are pending (gradients_pending(); AdamW checks it).
// ORION_FIRST_WRITE_ZERO=0 turns this off: every zeroing is a full memset, as before.
#pragma once
#include <cstddef>

namespace orion::train {

void zero_gradients(float* g, size_t n);
bool first_write(float* dW, size_t n);
void finish_gradients(float* g, size_t n);
void forget_gradients(float* g, size_t n);
bool gradients_pending();

}  // namespace orion::train
