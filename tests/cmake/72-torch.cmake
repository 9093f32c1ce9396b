# mnist-train against PyTorch (label torch; Debian's python3-torch, which scripts/test.sh installs).
#
#   e2e_torch_adamw   200 full-batch AdamW steps of mnist-train and of
#                     bench/reference/train_ref.py from the same checkpoint: every
#                     loss within 1e-4 relative. Skipped (77, with the reason)
#                     when MNIST_PYTHON has no torch.
add_test(NAME e2e_torch_adamw COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_torch_adamw.sh
         $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN})
set_tests_properties(e2e_torch_adamw PROPERTIES LABELS "e2e;torch" TIMEOUT 300 SKIP_RETURN_CODE 77
                     ENVIRONMENT "PYTHON=${MNIST_PYTHON}")
#
#   e2e_torch_clip    100 full-batch SGD steps with --clip-grad-norm 0.2 (clipping most of
#                     them) and weight decay, mnist-train against train_ref.py's
#                     clip_grad_norm_ + torch.optim.SGD from the same checkpoint: every loss
#                     within 1e-4 relative; the reference without clipping must leave that bound.
add_test(NAME e2e_torch_clip COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_torch_clip.sh
         $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN})
set_tests_properties(e2e_torch_clip PROPERTIES LABELS "e2e;torch" TIMEOUT 300 SKIP_RETURN_CODE 77
                     ENVIRONMENT "PYTHON=${MNIST_PYTHON}")

#   reliability_torch_snippet   docs/reliability.md's "Loading a checkpoint in PyTorch": its
#                     Python block, read from the page, loads checkpoints of seed, linear,
#                     mlp and LeNet-5 into torch modules that score mnist-train's test
#                     accuracy within 1e-3. Skipped (77, with the reason) without torch.
# One slot: four short 2-rank runs, then one Python process.
add_test(NAME reliability_torch_snippet COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/reliability/test_torch_snippet.sh
         $<TARGET_FILE:mnist-train> ${MNIST_DATA_DIR} ${MNIST_MPIRUN})
set_tests_properties(reliability_torch_snippet PROPERTIES LABELS "reliability;torch" TIMEOUT 300
                     PROCESSORS 1 SKIP_RETURN_CODE 77 ENVIRONMENT "PYTHON=${MNIST_PYTHON}")
