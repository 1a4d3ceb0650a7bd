// The naive way, for ringpipe-bench's relaunch baseline: one launch per message, buffers in and
// out, no rings. Same work per message as test_map, after whose source it is built.

__kernel void relaunch_step(__global const rp_test_msg* in, __global rp_test_msg* out) {
  rp_test_msg m = *in;
  rp_test_msg r;
  rp_test_step(&m, &r);
  *out = r;
}
