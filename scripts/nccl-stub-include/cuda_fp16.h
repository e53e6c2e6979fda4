/* Stand-in: nccl.h includes it but nccl-smoke needs nothing from it. */
#pragma once
