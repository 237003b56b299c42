# Shared helpers of the benchmark summaries (report.awk, levers.awk): loaded first with
# `awk -f stats.awk -f <summary>.awk`.

# Sorts a[1..n] in place, numerically (insertion sort: n is a handful of repetitions).
function sort_numeric(a, n,    i, j, t) {
  for (i = 2; i <= n; i++) {
    t = a[i]
    for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]
    a[j + 1] = t
  }
}

# The median of a sorted a[1..n], n >= 1.
function median_sorted(a, n) {
  return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}

# A figure with about four significant digits; "-" when there is none.
function fmt_num(x) {
  if (x == "") return "-"
  if (x >= 1000) return sprintf("%.0f", x)
  if (x >= 100) return sprintf("%.1f", x)
  if (x >= 10) return sprintf("%.2f", x)
  return sprintf("%.3f", x)
}
