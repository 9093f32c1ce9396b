# gpu-tests: what the GPU-node kit's default run needs built (scripts/gpu-node/run.sh, step
# build): mnist-train, the CUDA module and the programs of the GPU suite (label gpu) and of
# gpu-sanitize. One target, so that make builds them all in parallel; the kit's step all
# builds the rest. In this fragment's name "cuda", so MNIST_DDP_TESTS=gpu has it too.
# A GPU test whose program is left out of it fails in the kit's quick step ("Could not
# find executable"), never passes.
if(MNIST_DDP_HAVE_CUDA)
  add_custom_target(gpu-tests)
  add_dependencies(gpu-tests mnist-train mnist-cuda)
  foreach(_prog gpu_ops gpu_train_parity gpu_graph gpu_allreduce gpu_deadline gpu_train_step)
    if(TARGET ${_prog})
      add_dependencies(gpu-tests ${_prog})
    endif()
  endforeach()
endif()
