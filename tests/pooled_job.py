"""A tiny job whose one step uses the fake engine in the ``engine`` pool, run in-process by subprocesses.

``python -m tests.pooled_job LOG SECONDS [MARKER]``: executes the job in process on the
instance of ``$DAGSTER_HOME`` (as ``themis run`` does) and appends the engine step's start
and end times to LOG; MARKER, if given, is written once the step has started. The step ends
early once another execution's step has been in the engine with it.
"""

import json
import sys
import time
import uuid
from pathlib import Path

from dagster import (
    Config,
    DagsterInstance,
    Definitions,
    OpExecutionContext,
    asset,
    define_asset_job,
    in_process_executor,
)

from themis_dagster.engines.fake import FakeEngine
from themis_dagster.runs.owner import owner_tags
from themis_dagster.runs.pools import ENGINE_POOL


class StepConfig(Config):
    log: str
    seconds: float
    marker: str = ""


@asset(pool=ENGINE_POOL)
def engine_step(context: OpExecutionContext, config: StepConfig) -> None:
    started = time.time()
    if config.marker:
        Path(config.marker).write_text(context.run_id)
    engine = FakeEngine()
    # the engine "at work" for ``seconds``, or until another execution's step is seen in it too (the
    # overlap an unlimited pool allows is then shown; the files are kept, so neither step misses it)
    here = Path(f"{config.log}.in-step.{context.run_id}")
    here.touch()
    while time.time() < started + config.seconds:
        if any(path != here for path in here.parent.glob(f"{Path(config.log).name}.in-step.*")):
            break
        time.sleep(0.1)
    engine.shutdown()
    with Path(config.log).open("a") as log:
        log.write(json.dumps({"run_id": context.run_id, "start": started, "end": time.time()}) + "\n")


pooled_job = define_asset_job("pooled", selection=[engine_step], executor_def=in_process_executor)


def main(argv: list[str]) -> int:
    log, seconds, *marker = argv
    config = {"ops": {"engine_step": {"config": {"log": log, "seconds": float(seconds), "marker": "".join(marker)}}}}
    job = Definitions(assets=[engine_step], jobs=[pooled_job]).resolve_job_def("pooled")
    run_id = str(uuid.uuid4())
    result = job.execute_in_process(
        run_config=config, instance=DagsterInstance.get(), run_id=run_id, tags=owner_tags(run_id)
    )
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
