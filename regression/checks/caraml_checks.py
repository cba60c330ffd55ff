# The suite's benchmarks as ReFrame checks: one per benchmark and
# configuration, on every partition of regression/config.py. Each check
# runs the job script that the benchmark's JUBE script plans for its system
# (the same driver, options, launcher, container and jpwr energy), decides
# the row with the suite's row model, and reads sanity, performance and
# provenance from it (caraml/regression/). A row that is no measurement
# (caraml/row/verdict.py) never passes: its figures are expected failures
# that name the verdict. Usage: docs/reframe.md.
import os
import shlex
import sys
from pathlib import Path

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable, xfail
from reframe.core.exceptions import ReframeError, SanityError
from reframe.core.logging import getlogger
from reframe.core.meta import make_test

# appended, not inserted: ReFrame removes the folder it added by its position
sys.path.append(str(Path(__file__).resolve().parents[2]))
from caraml.benchmarks import all_benchmarks
from caraml.compare import CompareError
from caraml.login.jobplan import ROOT
from caraml.regression import centre, figures
from caraml.regression.plan import (
    JOB_SCRIPT,
    PlanError,
    job_resources,
    local_lock,
    plan,
    prepare_data,
    run_row_model,
)
from caraml.row.row_json import read

# One check per benchmark of the table (caraml/benchmarks.py) and each of its
# configurations (JUBE tags besides the system's)
BENCHMARKS = list(all_benchmarks())
CONFIGURATIONS = sorted({c for b in BENCHMARKS for c in b.reframe.configurations})
# what the checks said once per ReFrame run (a note for every check would repeat it)
_SAID = set()


class CaramlBenchmark(rfm.RunOnlyRegressionTest):
    """One benchmark's checks (a subclass per benchmark below, so that each
    logs to its own perflog, <class name>.log, whose columns stay the same)."""

    configuration = parameter(CONFIGURATIONS)
    valid_systems = ["*"]
    # the suite's own environment (regression/config.py); a centre's
    # configuration names its own with -S valid_prog_environs=NAME
    valid_prog_environs = ["caraml", "builtin"]
    # the platform.xml tag of the system; empty: the partition's extras
    # (caraml_tags, regression/config.py), else the partition's name
    system_tag = variable(str, value="")
    # more JUBE tags for the configuration (-S extra_tags="precision")
    extra_tags = variable(str, value="")
    # a centre's own reference file(s), beside caraml-compare's (-S or CARAML_REFERENCES; ':' between)
    references_file = variable(str, value=os.environ.get("CARAML_REFERENCES", ""))
    # caraml-compare's own reference file (caraml/compare/references.yaml); false: only references_file
    suite_references = variable(typ.Bool, value=True)
    # the row's provenance, for the perflog (set once the row is decided)
    caraml_commit = variable(str, value="n/a")
    caraml_suite_version = variable(str, value="n/a")
    caraml_torch = variable(str, value="n/a")
    caraml_energy_methods = variable(str, value="n/a")
    caraml_energy_scope = variable(str, value="n/a")
    caraml_energy_kind = variable(str, value="n/a")
    caraml_energy_window = variable(str, value="n/a")
    caraml_system = variable(str, value="n/a")
    caraml_config = variable(str, value="n/a")
    # every JUBE tag the job was planned with: the system's, the benchmark's,
    # the configuration's and extra_tags (`jube run SCRIPT --tag ...` runs the same)
    caraml_tags = variable(str, value="n/a")
    caraml_flags = variable(str, value="n/a")
    caraml_status = variable(str, value="n/a")
    # yes, or the verdict on a row that is no measurement (its figures are expected failures)
    caraml_measurement = variable(str, value="n/a")
    # job.sh is the batch shell itself, as under JUBE: Slurm's warning before
    # the time limit (--signal=B:USR1) reaches its trap
    executable = "exec"
    tags = {"caraml"}
    # what a run leaves beside ReFrame's own files: the job, its logs, the
    # energy files of every rank and the decided row
    keep_files = ["job.sh", "params.json", "job.out", "job.err", "energy", "energy_summary.csv",
                  "jpwr.out", "jpwr.err", "row.out", "row.json"]

    def _system_tags(self) -> list[str]:
        if self.system_tag:
            return self.system_tag.split()
        return list(self.current_partition.extras.get("caraml_tags") or [self.current_partition.name])

    @run_after("init")
    def a_configuration_of_the_benchmark(self):
        self.skip_if(self.configuration not in self.benchmark.reframe.configurations,
                     f"{self.benchmark.name} has no configuration {self.configuration}")

    @run_after("init")
    def say_which_environments_it_runs_in(self):
        # ReFrame lists no check where no partition offers one, silently
        system = rt.runtime().system
        note = centre.environment_note(self.valid_prog_environs, {
            p.fullname: [e.name for e in p.environs] for p in system.partitions}, system.name)
        if note and note not in _SAID:
            _SAID.add(note)
            getlogger().warning(note)

    @run_after("setup")
    def a_system_of_platform_xml(self):
        try:
            self._tags = centre.system_tags(self._system_tags(),
                                            f"partition {self.current_partition.fullname}")
        except PlanError as error:
            raise ReframeError(str(error)) from None

    @run_after("setup")
    def read_the_references(self):
        # before the job: a broken reference file costs no run (a dry run names it too)
        extra = [Path(p) for p in self.references_file.split(":") if p]
        try:
            self._references = figures.load_references(extra, self.suite_references)
        except CompareError as error:
            raise ReframeError(str(error)) from None

    @run_before("run")
    def plan_the_job(self):
        tags = [*self._tags, *self.benchmark.reframe.tags, *self.configuration.split(),
                *self.extra_tags.split()]
        self.caraml_tags = " ".join(tags)
        try:
            planned = plan(self.benchmark, tags, Path(self.stagedir))
            if not self.is_dry_run():  # a dry run downloads no corpus
                prepare_data(planned)
        except PlanError as error:
            # ReFrame's own error: the one-line cause, without a traceback
            raise ReframeError(str(error)) from None
        resources = job_resources(planned.params)
        self.num_tasks = resources["num_tasks"]
        self.num_tasks_per_node = resources["num_tasks_per_node"]
        self.num_cpus_per_task = resources["num_cpus_per_task"]
        self.time_limit = resources["time_limit"]
        self.job.options += resources["options"]
        self.env_vars["PYTHONPATH"] = str(ROOT)
        job = ["bash", JOB_SCRIPT, ">job.out", "2>job.err"]
        if self.current_partition.scheduler.registered_name == "local":
            # one measurement at a time on this host, whichever partition runs it
            job = ["flock", shlex.quote(str(local_lock())), *job]
        self.executable_opts = job
        # job.sh starts the system's launcher (srun, torchrun) itself, once:
        # under a partition's srun it would run once a task, and srun would
        # try to execute the batch shell's `exec`
        self.job.launcher = getlauncher("local")()
        if self.is_dry_run():
            getlogger().info(f"{self.display_name}: job script {planned.job_script}")

    @run_before("sanity")
    def decide_the_row(self):
        if self.is_dry_run():
            # no job, no row: a perflog line now would have no figures, and
            # its other header would make ReFrame rotate the perflog to .h0
            self.skip(f"dry run: {Path(self.stagedir) / JOB_SCRIPT} planned, nothing measured or logged")
        try:
            run_row_model(self.benchmark.name, Path(self.stagedir))
        except PlanError as error:
            raise ReframeError(str(error)) from None

    @sanity_function
    def the_job_ran_to_its_figures(self):
        return ran(Path(self.stagedir) / "row.json")

    @run_before("performance")
    def figures_of_the_row(self):
        if self.is_dry_run():  # no job ran: no row
            return
        row = read(Path(self.stagedir) / "row.json")
        for name, value in figures.provenance(row).items():
            setattr(self, f"caraml_{name}", value)
        self.perf_variables = {name: sn.make_performance_function(sn.defer(value), unit)
                               for name, (value, unit) in figures.perf_values(row).items()}
        # a figure the row lacks is an expected failure that says why, not a bare nan
        # a centre's subclass may give references the ReFrame way: merged, the stricter bound wins
        part = self.current_partition.fullname
        theirs = {name: self.reference.get(f"{part}:{name}") for name in self.perf_variables}
        self.reference = figures.reframe_reference(row, self._references, part, xfail,
                                                   {k: v for k, v in theirs.items() if v is not None})


@sn.deferrable
def ran(row_json: Path) -> bool:
    """ReFrame's sanity, evaluated once the row is there (never in a dry run):
    whether the job ran to its figures; whether they are a measurement is
    the performance stage's (figures.reframe_reference)."""
    ok, why = figures.sanity(read(row_json))
    if not ok:
        raise SanityError(why)
    return True


# one test class per benchmark: Caraml_image, Caraml_llm, Caraml_operator,
# names of this module, so that a centre's own check can subclass one
for _benchmark in BENCHMARKS:
    globals()[f"Caraml_{_benchmark.name}"] = rfm.simple_test(make_test(
        f"Caraml_{_benchmark.name}", (CaramlBenchmark,),
        {"benchmark": parameter([_benchmark], fmt=lambda b: b.name)}))
