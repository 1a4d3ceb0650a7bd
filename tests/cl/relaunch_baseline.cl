// The naive way, for ringpipe-bench's relaunch baseline: one launch per message, buffers in and
// out, no rings. Same work per message as test_map, after whose source it is built.

__kernel void relaunch_step(__global const rp_test_msg* in, __global rp_test_msg* out) {
  rp_test_msg m = *in;
  rp_test_msg r;
  rp_test_step(&m, &r);
  *out = r;
}

// The hand-written batched program of ringpipe-bench's `versus` topic: one work-item per message
// of a batch, one launch per batch.
__kernel void batch_step(__global const rp_test_msg* in, __global rp_test_msg* out) {
  const size_t i = get_global_id(0);
  rp_test_msg m = in[i];
  rp_test_msg r;
  rp_test_step(&m, &r);
  out[i] = r;
}
