"""Regenerate the picture of the checker's HTML report that the docs show:

    scripts/run.sh python scripts/report_screenshot.py [OUT.png]

Runs ``python -m dlbridge check --html`` on the installed libraries, opens the report in
headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven with selenium) and
saves the top of the report and its matrix of all features as one PNG (default:
docs/img/check-report.png).
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

REPO = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT = 1280, 1000


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "img" / "check-report.png"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.html"
        subprocess.run(
            [sys.executable, "-m", "dlbridge", "check", "--quiet", "--html", str(report)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        options = webdriver.ChromeOptions()
        for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={WIDTH},{HEIGHT}"):
            options.add_argument(arg)
        # Debian's binaries, named: selenium must not go looking for a browser to download
        options.binary_location = shutil.which("chromium") or "chromium"
        service = Service(executable_path=shutil.which("chromedriver") or "chromedriver")
        driver = webdriver.Chrome(options=options, service=service)
        try:
            driver.get(report.as_uri())
            heading = driver.find_element(
                By.XPATH, "//h2[starts-with(normalize-space(), 'All features')]"
            )
            driver.execute_script(
                "arguments[0].scrollIntoView(true); window.scrollBy(0, -8);", heading
            )
            out.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(out))
        finally:
            driver.quit()
    print(out)


if __name__ == "__main__":
    main()
