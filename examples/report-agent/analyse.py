# The analysis a model writes for examples/report-agent, kept as a file so
# the test and the README use the same code. It runs in the sandbox's code
# interpreter, in the work directory: it reads the first CSV there, sums its
# first numeric column, finds the row with the largest value, draws a bar
# chart (chart.png) and writes report.md.
import glob
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

path = sorted(glob.glob("*.csv"))[0]
df = pd.read_csv(path)
value = df.select_dtypes("number").columns[0]
label = [c for c in df.columns if c != value][0]
total = df[value].sum()
best = df.loc[df[value].idxmax()]

ax = df.plot.bar(x=label, y=value, legend=False, title=f"{value} by {label}")
ax.set_ylabel(value)
plt.tight_layout()
plt.savefig("chart.png", dpi=100)

with open("report.md", "w") as f:
    f.write(f"# {path}\n\n")
    f.write(f"- Rows: {len(df)}\n")
    f.write(f"- Total {value}: {total}\n")
    f.write(f"- Best {label}: {best[label]} ({best[value]} {value})\n\n")
    f.write("![chart](chart.png)\n\n")
    f.write("```\n" + df.describe().to_string() + "\n```\n")
print(f"total {total}, best {best[label]}")
