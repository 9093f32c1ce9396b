set terminal pngcairo size 860,560 noenhanced
set output '/work/wt-adamw/bench/results/2026-11-24-vm-adamw/ips-lenet.png'
set title "MNIST lenet: training images/s against ranks\nvm, host backend vs PyTorch 1.13.0a0 CPU"
set xlabel 'ranks (processes)'
set ylabel 'images/s (log scale)'
set logscale y
set xtics (1)
set key below horizontal maxcols 3 height 1
set grid
plot '/work/wt-adamw/bench/results/2026-11-24-vm-adamw/ips-lenet.dat' using 1:2 with linespoints lw 2 pt 7 lc 1 title 'mnist-train b64', '/work/wt-adamw/bench/results/2026-11-24-vm-adamw/ips-lenet.dat' using 1:3 with linespoints lw 2 pt 6 dt 2 lc 1 title 'PyTorch b64'
