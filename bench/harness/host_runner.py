"""The host matrix's runs: mnist-train's host backend under mpirun (OpenBLAS threads per rank,
explicit binding) and the PyTorch CPU reference (one thread per process, gloo between ranks)."""
import os

from .common import Runner


class HostRunner(Runner):
    def ours(self, model, batch, ranks, threads, epochs=1, extra=(), tag=""):
        """One mnist-train run on the host backend, `threads` OpenBLAS threads per rank."""
        mfile = os.path.join(self.metrics_dir, f"ours-{model}-b{batch}-r{ranks}-t{threads}{tag}.jsonl")
        bind = ["--bind-to", "core"] if threads == 1 and ranks <= self.a.cores else ["--bind-to", "none"]
        launch = self.mpirun + ["-n", str(ranks)] + bind + \
            ["-x", "OPENBLAS_CORETYPE"] * ("OPENBLAS_CORETYPE" in self.env) + \
            [self.train, "--backend", "host", "--threads", str(threads)]
        return self.mnist_train(launch, model, batch, mfile, epochs, self.limit + list(extra))

    def torch(self, model, batch, ranks, threads, epochs=1, extra=(), tag=""):
        """One run of the PyTorch reference on the CPU (DDP over gloo between ranks)."""
        mfile = os.path.join(self.metrics_dir, f"torch-{model}-b{batch}-r{ranks}-t{threads}{tag}.jsonl")
        return self.train_ref(model, batch, ranks, threads, mfile, epochs, extra)
