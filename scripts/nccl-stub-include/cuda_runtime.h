/* Stand-in for the CUDA runtime header: nccl.h needs only the opaque stream type.
   Lets bindgen run without a CUDA toolkit. */
#pragma once
#include <stddef.h>
typedef struct CUstream_st *cudaStream_t;
