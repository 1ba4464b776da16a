# SPDX-License-Identifier: BSL-1.0
# bench/plot.gp: draws gpu-async-bench's results (gnuplot 5), every cell the run measured.
#   gnuplot -e "stem='<dir>/gpu-async-bench'; out='<file>.png'; cells='10:64 1000:4096';
#               load='start 0.99 1.90 3.40, end 1.29 1.50 2.90 (2 cores)'" plot.gp
# `cells` lists the cells as work_us:pending (gpu-async-bench passes those it ran); `load` is the
# machine's load average, printed in the title (other work on the machine skews every figure).
# For each cell, two panels: the store-to-handler latency CDF per strategy (<stem>-cdf.csv), and
# CPU per waited second against p50 (open) and p99 (filled) latency (<stem>.csv); one colour per
# strategy. Three cells to a row.
if (!exists("stem")) stem = "gpu-async-bench"
if (!exists("out")) out = stem.".png"
if (!exists("cells")) cells = "1000:64"
if (!exists("load")) load = "not recorded"

strategies = "ours-service ours-service-steps ours-service+predict ours-fill ours-fill+predict ours-fill-dp5 ours-fill-dp25 ours-fill-dp50 ours-fill-dp100 ours-fill-dp1ms ours-service-dp10 ours-service-dp50 ours-service-dp100 ours-service-dp1ms ours-service-ringing ours-fill-ringing callback-post-idealized callback-thread-post timer-poll-50us timer-poll-1ms blocking-cv-thread spin-poll-thread sleep-watcher-20us"
colors = "#d62728 #f5b041 #ff7f0e #1f77b4 #17becf #5dade2 #3c8dbc #2874a6 #1b4f72 #0b1f3a #ff9896 #c5b0d5 #c49c94 #7b3f00 #aec7e8 #98df8a #2ca02c #bcbd22 #9467bd #8c564b #e377c2 #7f7f7f #17a589"
ours_n = 16  # the first ours_n strategies are ours (solid lines)

n = words(cells)
per_row = (n < 3) ? n : 3
groups = int((n + per_row - 1) / per_row)
cell_wu(c) = int(substr(c, 1, strstrt(c, ":") - 1))
cell_pp(c) = int(substr(c, strstrt(c, ":") + 1, strlen(c)))

set terminal pngcairo size 620 * per_row, 560 * groups * 2 font "DejaVu Sans,10" noenhanced
set output out
set datafile separator ","
set multiplot layout groups * 2, per_row \
    title sprintf("gpu-async-bench: store-to-handler latency and waiting CPU, simulated device, %d cells; load average: %s", n, load)

do for [g = 0:groups - 1] {
    # The CDF row of this group of cells.
    do for [k = 1:per_row] {
        i = g * per_row + k
        if (i <= n) {
            wu = cell_wu(word(cells, i))
            pp = cell_pp(word(cells, i))
            set title sprintf("latency CDF, %d us work, %d pending", wu, pp)
            set logscale x
            unset logscale y
            set xlabel "store-to-handler latency (us, log)"
            set ylabel "fraction of completions"
            set yrange [0:1]
            set grid xtics ytics mxtics
            set key bottom right font ",8"
            in_cdf(s) = (strcol(3) eq s && $1 == wu && $2 == pp)
            plot for [j=1:ours_n] stem."-cdf.csv" skip 1 \
                 using (in_cdf(word(strategies,j)) ? $5 : 1/0):4 \
                 with lines lw 3 lc rgb word(colors,j) title word(strategies,j), \
                 for [j=ours_n+1:words(strategies)] stem."-cdf.csv" skip 1 \
                 using (in_cdf(word(strategies,j)) ? $5 : 1/0):4 \
                 with lines lw 2 dt 2 lc rgb word(colors,j) title word(strategies,j)
        } else {
            set multiplot next
        }
    }
    # The CPU row of the same cells.
    do for [k = 1:per_row] {
        i = g * per_row + k
        if (i <= n) {
            wu = cell_wu(word(cells, i))
            pp = cell_pp(word(cells, i))
            set title sprintf("CPU vs latency, %d us work, %d pending (open: p50, filled: p99)", wu, pp)
            set logscale xy
            set xlabel "store-to-handler latency (us, log)"
            set ylabel "CPU s/s, process less the device (log)"
            set autoscale y
            set key top right font ",8"
            in_cell(s) = (strcol(3) eq s && $1 == wu && $2 == pp)
            plot for [j=1:words(strategies)] stem.".csv" skip 1 \
                 using (in_cell(word(strategies,j)) ? $5/1000 : 1/0):($10 > 0 ? $10 : 1e-4) \
                 with points pt 6 ps 1.4 lc rgb word(colors,j) notitle, \
                 for [j=1:words(strategies)] stem.".csv" skip 1 \
                 using (in_cell(word(strategies,j)) ? $7/1000 : 1/0):($10 > 0 ? $10 : 1e-4) \
                 with points pt 7 ps 1.4 lc rgb word(colors,j) title word(strategies,j)
        } else {
            set multiplot next
        }
    }
}
unset multiplot
