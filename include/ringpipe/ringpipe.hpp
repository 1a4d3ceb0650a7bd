#pragma once
// Everything an application uses: devices and the runtime, rings, ring kernels, links, pipelines
// and their plans and metrics, barriers, device arrays and the transfers between them, collectives,
// partitions, parallel_for over devices and the load balancer.

#include <ringpipe/array.hpp>
#include <ringpipe/balance.hpp>
#include <ringpipe/barrier.hpp>
#include <ringpipe/blocking.hpp>
#include <ringpipe/collective.hpp>
#include <ringpipe/copy_bandwidth.hpp>
#include <ringpipe/cpu_cores.hpp>
#include <ringpipe/device.hpp>
#include <ringpipe/error.hpp>
#include <ringpipe/kernel.hpp>
#include <ringpipe/link.hpp>
#include <ringpipe/live_view.hpp>
#include <ringpipe/metrics.hpp>
#include <ringpipe/mode.hpp>
#include <ringpipe/occupancy.hpp>
#include <ringpipe/parallel_for.hpp>
#include <ringpipe/partition.hpp>
#include <ringpipe/pipeline.hpp>
#include <ringpipe/pipeline_barrier.hpp>
#include <ringpipe/placement.hpp>
#include <ringpipe/plan.hpp>
#include <ringpipe/program.hpp>
#include <ringpipe/ring.hpp>
#include <ringpipe/runtime.hpp>
#include <ringpipe/split_array.hpp>
#include <ringpipe/topology.hpp>
#include <ringpipe/transfer.hpp>
