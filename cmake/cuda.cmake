# cuda.cmake - finds the CUDA toolkit, cuBLAS and NCCL for the CUDA backend.
# Sets MNIST_DDP_HAVE_CUDA, MNIST_CUDA_SOURCES and MNIST_CUDA_LIBRARIES.
if(MNIST_DDP_CUDA STREQUAL "ON")
  message(FATAL_ERROR "CUDA backend not written yet")
endif()
